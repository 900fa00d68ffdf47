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
INSERT INTO "audit" VALUES(1,'ev_dc327153651bffa5','run_started','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a',1.79652444437249517441e+09,'{"id":"ev_dc327153651bffa5","ts":1796524444.3724952,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null}','0000000000000000000000000000000000000000000000000000000000000000','52838b38b60cef03b32b9968dfedd055cb52d34c1091ae722d273c0ae6ebabcd','');
INSERT INTO "audit" VALUES(2,'ev_902e762030544bff','route_decided','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a',1.79652444437254118917e+09,'{"id":"ev_902e762030544bff","ts":1796524444.3725412,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}','52838b38b60cef03b32b9968dfedd055cb52d34c1091ae722d273c0ae6ebabcd','a7a6d5cde8e50ef5c5d7b6b2ad68b79fe32a6a364dc0c42358bc60123691968c','');
INSERT INTO "audit" VALUES(3,'ev_2c66b791f77debc4','agent_started','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a',1.79652444437259721761e+09,'{"id":"ev_2c66b791f77debc4","ts":1796524444.3725972,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33}','a7a6d5cde8e50ef5c5d7b6b2ad68b79fe32a6a364dc0c42358bc60123691968c','603c0ffa7ffe39ea2d1e39e3549fe417bec5c5c87d6c79ade864ed7fb700c2c5','');
INSERT INTO "audit" VALUES(4,'ev_da62aab0546f0cc1','tool_called','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a',1.79652444437512111667e+09,'{"id":"ev_da62aab0546f0cc1","ts":1796524444.375121,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_9db79c392b44f789.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.40194899997914035,"result_chars":15,"truncated":false}','603c0ffa7ffe39ea2d1e39e3549fe417bec5c5c87d6c79ade864ed7fb700c2c5','ff3da8a3edb5fa0a111a87f9d81b159d673921c88f7b7436748ea4e2f1d94dcf','');
INSERT INTO "audit" VALUES(5,'ev_c1ef51cadeadac8a','tool_called','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a',1.79652444438107085225e+09,'{"id":"ev_c1ef51cadeadac8a","ts":1796524444.3810709,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_9db79c392b44f789.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.31556100009311194,"result_chars":14,"truncated":false}','ff3da8a3edb5fa0a111a87f9d81b159d673921c88f7b7436748ea4e2f1d94dcf','993a8d938334f9a7e24fb3ac0c1c3d92fc2769a7f57ec39f7d7c6cb54916cab4','');
INSERT INTO "audit" VALUES(6,'ev_d22d2ff03f9a9cb3','interrupt_raised','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a',1.79652444438235569003e+09,'{"id":"ev_d22d2ff03f9a9cb3","ts":1796524444.3823557,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_b23e5a7eff201dae","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","agent":"graph","call_id":"call_9db79c392b44f789","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796524444.3823454}}','993a8d938334f9a7e24fb3ac0c1c3d92fc2769a7f57ec39f7d7c6cb54916cab4','2af212d110d8cd0d684bcc240d4bd9fc909cdd99ab6f7ae4db5ca43c3ce8b51e','[["msg_999f93e89291d248","035b73f40f24a664f852b1eec99f5259544b95417466eac51bb5a680b706229c"],["msg_aa3a408baf4a6da0","c919049ad976592e3f006c44eab41c29014426d36544f56b6bdc64a145504ad7"]]');
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
INSERT INTO "checkpoints" VALUES('golden-graph','run_b7c8a2b34f88c648',4,'interrupted','{"format":2,"session":{"session_id":"golden-graph","user_id":null,"holder":null,"holder_since":null,"incoming":null,"state":{},"created_at":1796524444.372131,"updated_at":1796524444.3721316,"version":1,"requests":{},"control":{}},"message":"{\"order_id\": \"ORD-42\"}","user_id":null,"user_msg_id":"msg_999f93e89291d248","run_id":"run_b7c8a2b34f88c648","trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","started_at":1796524444.3724837,"events":[{"id":"ev_dc327153651bffa5","ts":1796524444.3724952,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null},{"id":"ev_902e762030544bff","ts":1796524444.3725412,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]},{"id":"ev_2c66b791f77debc4","ts":1796524444.3725972,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33},{"id":"ev_da62aab0546f0cc1","ts":1796524444.375121,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_9db79c392b44f789.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.40194899997914035,"result_chars":15,"truncated":false},{"id":"ev_c1ef51cadeadac8a","ts":1796524444.3810709,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_9db79c392b44f789.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.31556100009311194,"result_chars":14,"truncated":false},{"id":"ev_d22d2ff03f9a9cb3","ts":1796524444.3823557,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_b23e5a7eff201dae","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","agent":"graph","call_id":"call_9db79c392b44f789","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796524444.3823454}}],"messages":[{"id":"msg_999f93e89291d248","role":"user","content":"{\"order_id\": \"ORD-42\"}","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_b7c8a2b34f88c648","ts":1796524444.3725102},{"id":"msg_aa3a408baf4a6da0","role":"assistant","content":null,"agent":"graph","tool_calls":[{"id":"call_9db79c392b44f789","name":"checkout","arguments":"{\"step\": 0}"}],"tool_call_id":null,"name":null,"run_id":"run_b7c8a2b34f88c648","ts":1796524444.373051}],"path":["graph"],"handoffs":[],"usage":{},"model_calls":0,"delegations":0,"cost":0.0,"handoff_usage":[],"last_reply":null,"request_id":null,"start":{"state":{"log":[],"order_id":""},"input":{"order_id":"ORD-42"},"step":0,"parent":null},"final":null,"refused":[],"guardrails":[],"screened":[],"turn":{"index":0,"agent":"graph","incoming":null,"since":"msg_999f93e89291d248","reason":"entry agent","policy":null,"fallback":false,"started":true,"view":[{"id":"msg_4d211caf27c795fb","role":"system","content":"You are graph.\n\nYour final answer is JSON only, of this shape: {\"log\"?: [string, ...], \"order_id\"?: string}","agent":"graph","tool_calls":null,"tool_call_id":null,"name":null,"run_id":null,"ts":1796524444.3725793},"msg_999f93e89291d248"],"context_tokens":33,"scratch":["msg_aa3a408baf4a6da0"],"iteration":1,"usage":{"input_tokens":0,"output_tokens":0},"tools_called":0,"steps":1,"calls":[{"call":{"id":"call_9db79c392b44f789","name":"checkout","arguments":"{\"step\": 0}"},"args":{"step":0},"error":null,"key":"run_b7c8a2b34f88c648:0:0","content":null,"approved":false,"rejection":null,"sub":null,"started":true,"resumes":[],"memo":[{"step":"reserve","result":"reserved ORD-42"},{"step":"charge","result":"charged ORD-42"}],"kernel":false,"masked":[]}],"accepted":null,"halt":null,"halt_reason":"","accounted":false},"turns":1,"card":null,"approval":null,"interrupt":{"id":"int_b23e5a7eff201dae","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","agent":"graph","call_id":"call_9db79c392b44f789","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796524444.3823454},"seq":4,"saved_messages":2,"saved_events":6,"sink_failed":false,"parent_run_id":null,"parent_call_id":null}','{"agent": "graph", "interrupt": {"id": "int_b23e5a7eff201dae", "session_id": "golden-graph", "run_id": "run_b7c8a2b34f88c648", "trace_id": "a454f9ad6586c59d7f2696a8b6faf18a", "agent": "graph", "call_id": "call_9db79c392b44f789", "name": "checkout", "value": "ship ORD-42?", "index": 0, "created_at": 1796524444.3823454}}',1.79652444438277053831e+09);
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
INSERT INTO "events" VALUES(1,'ev_dc327153651bffa5','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a','run_b7c8a2b34f88c648','run_started','{"id":"ev_dc327153651bffa5","ts":1796524444.3724952,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null}',1.79652444437249517441e+09);
INSERT INTO "events" VALUES(2,'ev_902e762030544bff','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a','run_b7c8a2b34f88c648','route_decided','{"id":"ev_902e762030544bff","ts":1796524444.3725412,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}',1.79652444437254118917e+09);
INSERT INTO "events" VALUES(3,'ev_2c66b791f77debc4','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a','run_b7c8a2b34f88c648','agent_started','{"id":"ev_2c66b791f77debc4","ts":1796524444.3725972,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33}',1.79652444437259721761e+09);
INSERT INTO "events" VALUES(4,'ev_da62aab0546f0cc1','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a','run_b7c8a2b34f88c648','tool_called','{"id":"ev_da62aab0546f0cc1","ts":1796524444.375121,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_9db79c392b44f789.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.40194899997914035,"result_chars":15,"truncated":false}',1.79652444437512111667e+09);
INSERT INTO "events" VALUES(5,'ev_c1ef51cadeadac8a','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a','run_b7c8a2b34f88c648','tool_called','{"id":"ev_c1ef51cadeadac8a","ts":1796524444.3810709,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_9db79c392b44f789.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.31556100009311194,"result_chars":14,"truncated":false}',1.79652444438107085225e+09);
INSERT INTO "events" VALUES(6,'ev_d22d2ff03f9a9cb3','golden-graph','a454f9ad6586c59d7f2696a8b6faf18a','run_b7c8a2b34f88c648','interrupt_raised','{"id":"ev_d22d2ff03f9a9cb3","ts":1796524444.3823557,"trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_b23e5a7eff201dae","session_id":"golden-graph","run_id":"run_b7c8a2b34f88c648","trace_id":"a454f9ad6586c59d7f2696a8b6faf18a","agent":"graph","call_id":"call_9db79c392b44f789","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796524444.3823454}}',1.79652444438235569003e+09);
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
INSERT INTO "messages" VALUES(1,'msg_999f93e89291d248','golden-graph','run_b7c8a2b34f88c648','user',NULL,'{"id":"msg_999f93e89291d248","role":"user","content":"{\"order_id\": \"ORD-42\"}","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_b7c8a2b34f88c648","ts":1796524444.3725102}',1.79652444437251019478e+09);
INSERT INTO "messages" VALUES(2,'msg_aa3a408baf4a6da0','golden-graph','run_b7c8a2b34f88c648','assistant','graph','{"id":"msg_aa3a408baf4a6da0","role":"assistant","content":null,"agent":"graph","tool_calls":[{"id":"call_9db79c392b44f789","name":"checkout","arguments":"{\"step\": 0}"}],"tool_call_id":null,"name":null,"run_id":"run_b7c8a2b34f88c648","ts":1796524444.373051}',1.79652444437305092812e+09);
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
INSERT INTO "sessions" VALUES('golden-graph',NULL,NULL,NULL,NULL,'{}',1.79652444437213110921e+09,1.79652444437213158604e+09,1,'{}','{}');
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
INSERT INTO "snapshots" VALUES('golden-graph','run_b7c8a2b34f88c648:0',1,'run_b7c8a2b34f88c648',0,NULL,'{"state": {"log": [], "order_id": "ORD-42"}, "next": ["checkout"], "path": []}',1.79652444437266421315e+09);
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
