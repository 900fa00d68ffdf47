PRAGMA user_version = 9;
BEGIN TRANSACTION;
CREATE TABLE audit (
            seq INTEGER PRIMARY KEY,
            event_id TEXT NOT NULL,
            type TEXT NOT NULL,
            session_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            ts REAL NOT NULL,
            data TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        , messages TEXT NOT NULL DEFAULT '');
INSERT INTO "audit" VALUES(1,'ev_5e318074ee6238fa','run_started','golden-graph','fc0fa810795433037a6844b291572701',1.79652457186809968951e+09,'{"id":"ev_5e318074ee6238fa","ts":1796524571.8680997,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null}','0000000000000000000000000000000000000000000000000000000000000000','657befb3280e15c30a437dab8d482fdd68674c298971faed0ba6e1cf9329f92c','');
INSERT INTO "audit" VALUES(2,'ev_6f978d909dbde349','route_decided','golden-graph','fc0fa810795433037a6844b291572701',1.79652457186814117429e+09,'{"id":"ev_6f978d909dbde349","ts":1796524571.8681412,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}','657befb3280e15c30a437dab8d482fdd68674c298971faed0ba6e1cf9329f92c','4f11611e8098588eb0620ed9b3392f2e6ed3aa17992d5c59b6549a1e52661ab8','');
INSERT INTO "audit" VALUES(3,'ev_30ee2e8e35103376','agent_started','golden-graph','fc0fa810795433037a6844b291572701',1.79652457186819362639e+09,'{"id":"ev_30ee2e8e35103376","ts":1796524571.8681936,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33}','4f11611e8098588eb0620ed9b3392f2e6ed3aa17992d5c59b6549a1e52661ab8','01e7033fc75c9e323c4ac04b3b8331ac0b8bf06acb4e70082ec267333b325340','');
INSERT INTO "audit" VALUES(4,'ev_b7b0f319fc360d0f','tool_called','golden-graph','fc0fa810795433037a6844b291572701',1.79652457187030959134e+09,'{"id":"ev_b7b0f319fc360d0f","ts":1796524571.8703096,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_cb62ab9706ee5ef0.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.28405399984876567,"result_chars":15,"truncated":false}','01e7033fc75c9e323c4ac04b3b8331ac0b8bf06acb4e70082ec267333b325340','f1225f97376db6e41ec94d3f146e7c2800bb02faee927e9a5b87673c5dddefba','');
INSERT INTO "audit" VALUES(5,'ev_de55d947daca89b8','tool_called','golden-graph','fc0fa810795433037a6844b291572701',1.79652457187142968178e+09,'{"id":"ev_de55d947daca89b8","ts":1796524571.8714297,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_cb62ab9706ee5ef0.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.07970899991960323,"result_chars":14,"truncated":false}','f1225f97376db6e41ec94d3f146e7c2800bb02faee927e9a5b87673c5dddefba','07839cd53a148d2d820c032608c2d7119e347f04f36295065c4942c400c2f2a0','');
INSERT INTO "audit" VALUES(6,'ev_09b4c091411ea6e2','interrupt_raised','golden-graph','fc0fa810795433037a6844b291572701',1.79652457187548208238e+09,'{"id":"ev_09b4c091411ea6e2","ts":1796524571.875482,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_c8c021a89dcdf159","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","trace_id":"fc0fa810795433037a6844b291572701","agent":"graph","call_id":"call_cb62ab9706ee5ef0","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796524571.8754728}}','07839cd53a148d2d820c032608c2d7119e347f04f36295065c4942c400c2f2a0','ad4e4ad437c6d6876312ea98435e508db0bdf9d46e3b0d3a827a4e7b65cfbced','[["msg_19441079aa529ff2","829488c17bb24c2dac30935d1328d97112ad39a6be2264f9b4fdc56849409006"],["msg_f0cb3bcb4cc7fb72","880961abad04be500e0be09c582bfb4473971861d001d8937b54e21218d02dec"]]');
CREATE TABLE board (
            board TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            version INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            writer TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (board, key)
        );
CREATE TABLE board_seqs (
            board TEXT PRIMARY KEY,
            seq INTEGER NOT NULL
        );
CREATE TABLE checkpoints (
            session_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            status TEXT NOT NULL,
            data TEXT NOT NULL,
            meta TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
INSERT INTO "checkpoints" VALUES('golden-graph','run_d3843b5244621bc0',4,'interrupted','{"format":3,"session":{"session_id":"golden-graph","user_id":null,"holder":null,"holder_since":null,"incoming":null,"state":{},"created_at":1796524571.8678157,"updated_at":1796524571.867816,"version":1,"requests":{},"control":{}},"message":"{\"order_id\": \"ORD-42\"}","user_id":null,"user_msg_id":"msg_19441079aa529ff2","run_id":"run_d3843b5244621bc0","trace_id":"fc0fa810795433037a6844b291572701","started_at":1796524571.8680902,"events":[],"messages":[],"path":["graph"],"handoffs":[],"usage":{},"model_calls":0,"delegations":0,"cost":0.0,"handoff_usage":[],"last_reply":null,"request_id":null,"start":{"state":{"log":[],"order_id":""},"input":{"order_id":"ORD-42"},"step":0,"parent":null},"final":null,"refused":[],"guardrails":[],"screened":[],"turn":{"index":0,"agent":"graph","incoming":null,"since":"msg_19441079aa529ff2","reason":"entry agent","policy":null,"fallback":false,"started":true,"view":[{"id":"msg_ff2c37db52ca2884","role":"system","content":"You are graph.\n\nYour final answer is JSON only, of this shape: {\"log\"?: [string, ...], \"order_id\"?: string}","agent":"graph","tool_calls":null,"tool_call_id":null,"name":null,"run_id":null,"ts":1796524571.8681755},"msg_19441079aa529ff2"],"context_tokens":33,"scratch":["msg_f0cb3bcb4cc7fb72"],"iteration":1,"usage":{"input_tokens":0,"output_tokens":0},"tools_called":0,"steps":1,"calls":[{"call":{"id":"call_cb62ab9706ee5ef0","name":"checkout","arguments":"{\"step\": 0}"},"args":{"step":0},"error":null,"key":"run_d3843b5244621bc0:0:0","content":null,"approved":false,"rejection":null,"sub":null,"started":true,"resumes":[],"memo":[{"step":"reserve","result":"reserved ORD-42"},{"step":"charge","result":"charged ORD-42"}],"kernel":false,"masked":[]}],"accepted":null,"halt":null,"halt_reason":"","accounted":false},"turns":1,"card":null,"approval":null,"interrupt":{"id":"int_c8c021a89dcdf159","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","trace_id":"fc0fa810795433037a6844b291572701","agent":"graph","call_id":"call_cb62ab9706ee5ef0","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796524571.8754728},"seq":4,"saved_messages":2,"saved_events":6,"committed":{"messages":2,"events":6,"first_message":"msg_19441079aa529ff2","last_message":"msg_f0cb3bcb4cc7fb72","first_event":"ev_5e318074ee6238fa","last_event":"ev_09b4c091411ea6e2"},"sink_failed":false,"parent_run_id":null,"parent_call_id":null}','{"agent": "graph", "interrupt": {"id": "int_c8c021a89dcdf159", "session_id": "golden-graph", "run_id": "run_d3843b5244621bc0", "trace_id": "fc0fa810795433037a6844b291572701", "agent": "graph", "call_id": "call_cb62ab9706ee5ef0", "name": "checkout", "value": "ship ORD-42?", "index": 0, "created_at": 1796524571.8754728}}',1.79652457187581753731e+09);
CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL,
            ts REAL NOT NULL
        );
INSERT INTO "events" VALUES(1,'ev_5e318074ee6238fa','golden-graph','fc0fa810795433037a6844b291572701','run_d3843b5244621bc0','run_started','{"id":"ev_5e318074ee6238fa","ts":1796524571.8680997,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null}',1.79652457186809968951e+09);
INSERT INTO "events" VALUES(2,'ev_6f978d909dbde349','golden-graph','fc0fa810795433037a6844b291572701','run_d3843b5244621bc0','route_decided','{"id":"ev_6f978d909dbde349","ts":1796524571.8681412,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}',1.79652457186814117429e+09);
INSERT INTO "events" VALUES(3,'ev_30ee2e8e35103376','golden-graph','fc0fa810795433037a6844b291572701','run_d3843b5244621bc0','agent_started','{"id":"ev_30ee2e8e35103376","ts":1796524571.8681936,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33}',1.79652457186819362639e+09);
INSERT INTO "events" VALUES(4,'ev_b7b0f319fc360d0f','golden-graph','fc0fa810795433037a6844b291572701','run_d3843b5244621bc0','tool_called','{"id":"ev_b7b0f319fc360d0f","ts":1796524571.8703096,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_cb62ab9706ee5ef0.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.28405399984876567,"result_chars":15,"truncated":false}',1.79652457187030959134e+09);
INSERT INTO "events" VALUES(5,'ev_de55d947daca89b8','golden-graph','fc0fa810795433037a6844b291572701','run_d3843b5244621bc0','tool_called','{"id":"ev_de55d947daca89b8","ts":1796524571.8714297,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_cb62ab9706ee5ef0.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.07970899991960323,"result_chars":14,"truncated":false}',1.79652457187142968178e+09);
INSERT INTO "events" VALUES(6,'ev_09b4c091411ea6e2','golden-graph','fc0fa810795433037a6844b291572701','run_d3843b5244621bc0','interrupt_raised','{"id":"ev_09b4c091411ea6e2","ts":1796524571.875482,"trace_id":"fc0fa810795433037a6844b291572701","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_c8c021a89dcdf159","session_id":"golden-graph","run_id":"run_d3843b5244621bc0","trace_id":"fc0fa810795433037a6844b291572701","agent":"graph","call_id":"call_cb62ab9706ee5ef0","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796524571.8754728}}',1.79652457187548208238e+09);
CREATE TABLE human_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            card TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'open',
            created_at REAL NOT NULL
        , claimed_by TEXT, answer TEXT, note TEXT NOT NULL DEFAULT '', updated_at REAL NOT NULL DEFAULT 0);
CREATE TABLE leases (
            key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            expires_at REAL NOT NULL
        );
CREATE TABLE locks (
            key TEXT PRIMARY KEY,
            expires_at REAL NOT NULL
        );
CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL,
            run_id TEXT,
            role TEXT NOT NULL,
            agent TEXT,
            data TEXT NOT NULL,
            ts REAL NOT NULL
        );
INSERT INTO "messages" VALUES(1,'msg_19441079aa529ff2','golden-graph','run_d3843b5244621bc0','user',NULL,'{"id":"msg_19441079aa529ff2","role":"user","content":"{\"order_id\": \"ORD-42\"}","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_d3843b5244621bc0","ts":1796524571.8681142}',1.79652457186811423299e+09);
INSERT INTO "messages" VALUES(2,'msg_f0cb3bcb4cc7fb72','golden-graph','run_d3843b5244621bc0','assistant','graph','{"id":"msg_f0cb3bcb4cc7fb72","role":"assistant","content":null,"agent":"graph","tool_calls":[{"id":"call_cb62ab9706ee5ef0","name":"checkout","arguments":"{\"step\": 0}"}],"tool_call_id":null,"name":null,"run_id":"run_d3843b5244621bc0","ts":1796524571.868562}',1.79652457186856198308e+09);
CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            user_id TEXT,
            holder TEXT,
            holder_since TEXT,
            incoming TEXT,
            state TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        , version INTEGER NOT NULL DEFAULT 0, requests TEXT NOT NULL DEFAULT '{}', control TEXT NOT NULL DEFAULT '{}');
INSERT INTO "sessions" VALUES('golden-graph',NULL,NULL,NULL,NULL,'{}',1.79652457186781573292e+09,1.79652457186781597132e+09,1,'{}','{}');
CREATE TABLE snapshots (
            thread_id TEXT NOT NULL,
            id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            run_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            parent_id TEXT,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (thread_id, id)
        );
INSERT INTO "snapshots" VALUES('golden-graph','run_d3843b5244621bc0:0',1,'run_d3843b5244621bc0',0,NULL,'{"state": {"log": [], "order_id": "ORD-42"}, "next": ["checkout"], "path": []}',1.79652457186825394632e+09);
CREATE TABLE tasks (
            run_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            status TEXT NOT NULL,
            version INTEGER NOT NULL,
            data TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (run_id, task_id)
        );
CREATE INDEX sessions_updated ON sessions (updated_at);
CREATE INDEX messages_session ON messages (session_id, seq);
CREATE INDEX events_session ON events (session_id, seq);
CREATE INDEX events_trace ON events (trace_id, seq);
CREATE INDEX human_queue_status ON human_queue (status, id);
CREATE INDEX locks_expiry ON locks (expires_at);
CREATE INDEX audit_session ON audit (session_id, seq);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
CREATE INDEX checkpoints_status ON checkpoints (status, updated_at);
CREATE INDEX leases_expiry ON leases (expires_at);
CREATE INDEX tasks_session ON tasks (session_id);
CREATE INDEX tasks_status ON tasks (status);
CREATE INDEX board_changes ON board (board, seq);
CREATE UNIQUE INDEX snapshots_seq ON snapshots (thread_id, seq);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('messages',2);
INSERT INTO "sqlite_sequence" VALUES('events',6);
COMMIT;
