PRAGMA user_version = 8;
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
INSERT INTO "audit" VALUES(1,'ev_fc916b10a2294b2b','run_started','golden-graph','f16233ccf9bc753373af5dae72d22596',1.79641069560572171209e+09,'{"id":"ev_fc916b10a2294b2b","ts":1796410695.6057217,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null}','0000000000000000000000000000000000000000000000000000000000000000','cfa6b1544d57752ca619d25b307756e050c011508f39fa156a18e39dc8a18a26','');
INSERT INTO "audit" VALUES(2,'ev_7ffac12a655c8433','route_decided','golden-graph','f16233ccf9bc753373af5dae72d22596',1.79641069560578560829e+09,'{"id":"ev_7ffac12a655c8433","ts":1796410695.6057856,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}','cfa6b1544d57752ca619d25b307756e050c011508f39fa156a18e39dc8a18a26','8ec970beb5e1d3b94990a5e5d360c1505b98c5084e2fac43a11c52ed24687d65','');
INSERT INTO "audit" VALUES(3,'ev_ac5ed30490938a30','agent_started','golden-graph','f16233ccf9bc753373af5dae72d22596',1.79641069560585951801e+09,'{"id":"ev_ac5ed30490938a30","ts":1796410695.6058595,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33}','8ec970beb5e1d3b94990a5e5d360c1505b98c5084e2fac43a11c52ed24687d65','ce203295583029f8e48d45773c9c01350ecbf9d681b94068d644b9155ffa73fc','');
INSERT INTO "audit" VALUES(4,'ev_569c00e5c0264c09','tool_called','golden-graph','f16233ccf9bc753373af5dae72d22596',1.79641069561294364925e+09,'{"id":"ev_569c00e5c0264c09","ts":1796410695.6129436,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_5c94a1afab9d5266.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":3.70413800010283,"result_chars":15,"truncated":false}','ce203295583029f8e48d45773c9c01350ecbf9d681b94068d644b9155ffa73fc','e26b6bb2862e6ef30b9a9df939f5311495f940903bff9e7f52cff8e035f9650d','');
INSERT INTO "audit" VALUES(5,'ev_5b1cad976ba2d15e','tool_called','golden-graph','f16233ccf9bc753373af5dae72d22596',1.79641069561699748043e+09,'{"id":"ev_5b1cad976ba2d15e","ts":1796410695.6169975,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_5c94a1afab9d5266.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.2910059999976511,"result_chars":14,"truncated":false}','e26b6bb2862e6ef30b9a9df939f5311495f940903bff9e7f52cff8e035f9650d','0f48266a55544582c3d5728dfa79fe78a30cdde99818d5ccfff25357bf8bb423','');
INSERT INTO "audit" VALUES(6,'ev_165b1c22ad570b67','interrupt_raised','golden-graph','f16233ccf9bc753373af5dae72d22596',1.79641069561832356451e+09,'{"id":"ev_165b1c22ad570b67","ts":1796410695.6183236,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_fe63c73d00a5c000","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","trace_id":"f16233ccf9bc753373af5dae72d22596","agent":"graph","call_id":"call_5c94a1afab9d5266","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796410695.6183093}}','0f48266a55544582c3d5728dfa79fe78a30cdde99818d5ccfff25357bf8bb423','9d290dfa62203380001267899875e9f5054e08d87876e633ad6f555ce14777b4','[["msg_151943320332dc24","258c04f31d9618f64274a6f97e7ff859b9d2cb140ae141461130a2a8b4718f75"],["msg_fb9db3afbb9bb1be","e4af12cb9430343976b03b7a21acd7d790939d42bda4ee75da5093885bef07ba"]]');
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
INSERT INTO "checkpoints" VALUES('golden-graph','run_3e6a640aa3a337c7',4,'interrupted','{"session":{"session_id":"golden-graph","user_id":null,"holder":null,"holder_since":null,"incoming":null,"state":{},"created_at":1796410695.6052613,"updated_at":1796410695.6052625,"version":1,"requests":{}},"message":"{\"order_id\": \"ORD-42\"}","user_id":null,"user_msg_id":"msg_151943320332dc24","run_id":"run_3e6a640aa3a337c7","trace_id":"f16233ccf9bc753373af5dae72d22596","started_at":1796410695.6056926,"events":[{"id":"ev_fc916b10a2294b2b","ts":1796410695.6057217,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null},{"id":"ev_7ffac12a655c8433","ts":1796410695.6057856,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]},{"id":"ev_ac5ed30490938a30","ts":1796410695.6058595,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33},{"id":"ev_569c00e5c0264c09","ts":1796410695.6129436,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_5c94a1afab9d5266.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":3.70413800010283,"result_chars":15,"truncated":false},{"id":"ev_5b1cad976ba2d15e","ts":1796410695.6169975,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_5c94a1afab9d5266.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.2910059999976511,"result_chars":14,"truncated":false},{"id":"ev_165b1c22ad570b67","ts":1796410695.6183236,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_fe63c73d00a5c000","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","trace_id":"f16233ccf9bc753373af5dae72d22596","agent":"graph","call_id":"call_5c94a1afab9d5266","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796410695.6183093}}],"messages":[{"id":"msg_151943320332dc24","role":"user","content":"{\"order_id\": \"ORD-42\"}","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_3e6a640aa3a337c7","ts":1796410695.6057432},{"id":"msg_fb9db3afbb9bb1be","role":"assistant","content":null,"agent":"graph","tool_calls":[{"id":"call_5c94a1afab9d5266","name":"checkout","arguments":"{\"step\": 0}"}],"tool_call_id":null,"name":null,"run_id":"run_3e6a640aa3a337c7","ts":1796410695.6065981}],"path":["graph"],"handoffs":[],"usage":{},"model_calls":0,"delegations":0,"cost":0.0,"handoff_usage":[],"last_reply":null,"request_id":null,"start":{"state":{"log":[],"order_id":""},"input":{"order_id":"ORD-42"},"step":0,"parent":null},"final":null,"refused":[],"turn":{"index":0,"agent":"graph","incoming":null,"since":"msg_151943320332dc24","reason":"entry agent","policy":null,"fallback":false,"started":true,"view":[{"id":"msg_b6a2c129da4bf31c","role":"system","content":"You are graph.\n\nYour final answer is JSON only, of this shape: {\"log\"?: [string, ...], \"order_id\"?: string}","agent":"graph","tool_calls":null,"tool_call_id":null,"name":null,"run_id":null,"ts":1796410695.6058369},{"id":"msg_151943320332dc24","role":"user","content":"{\"order_id\": \"ORD-42\"}","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_3e6a640aa3a337c7","ts":1796410695.6057432}],"context_tokens":33,"scratch":[{"id":"msg_fb9db3afbb9bb1be","role":"assistant","content":null,"agent":"graph","tool_calls":[{"id":"call_5c94a1afab9d5266","name":"checkout","arguments":"{\"step\": 0}"}],"tool_call_id":null,"name":null,"run_id":"run_3e6a640aa3a337c7","ts":1796410695.6065981}],"iteration":1,"usage":{"input_tokens":0,"output_tokens":0},"tools_called":0,"steps":1,"calls":[{"call":{"id":"call_5c94a1afab9d5266","name":"checkout","arguments":"{\"step\": 0}"},"args":{"step":0},"error":null,"key":"run_3e6a640aa3a337c7:0:0","content":null,"approved":false,"rejection":null,"sub":null,"started":true,"resumes":[],"memo":["reserved ORD-42","charged ORD-42"]}],"accepted":null,"halt":null,"halt_reason":""},"turns":1,"card":null,"approval":null,"interrupt":{"id":"int_fe63c73d00a5c000","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","trace_id":"f16233ccf9bc753373af5dae72d22596","agent":"graph","call_id":"call_5c94a1afab9d5266","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796410695.6183093},"seq":4,"saved_messages":2,"saved_events":6,"sink_failed":false,"parent_run_id":null,"parent_call_id":null}','{"agent": "graph", "interrupt": {"id": "int_fe63c73d00a5c000", "session_id": "golden-graph", "run_id": "run_3e6a640aa3a337c7", "trace_id": "f16233ccf9bc753373af5dae72d22596", "agent": "graph", "call_id": "call_5c94a1afab9d5266", "name": "checkout", "value": "ship ORD-42?", "index": 0, "created_at": 1796410695.6183093}}',1.79641069561880421636e+09);
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
INSERT INTO "events" VALUES(1,'ev_fc916b10a2294b2b','golden-graph','f16233ccf9bc753373af5dae72d22596','run_3e6a640aa3a337c7','run_started','{"id":"ev_fc916b10a2294b2b","ts":1796410695.6057217,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null}',1.79641069560572171209e+09);
INSERT INTO "events" VALUES(2,'ev_7ffac12a655c8433','golden-graph','f16233ccf9bc753373af5dae72d22596','run_3e6a640aa3a337c7','route_decided','{"id":"ev_7ffac12a655c8433","ts":1796410695.6057856,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}',1.79641069560578560829e+09);
INSERT INTO "events" VALUES(3,'ev_ac5ed30490938a30','golden-graph','f16233ccf9bc753373af5dae72d22596','run_3e6a640aa3a337c7','agent_started','{"id":"ev_ac5ed30490938a30","ts":1796410695.6058595,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33}',1.79641069560585951801e+09);
INSERT INTO "events" VALUES(4,'ev_569c00e5c0264c09','golden-graph','f16233ccf9bc753373af5dae72d22596','run_3e6a640aa3a337c7','tool_called','{"id":"ev_569c00e5c0264c09","ts":1796410695.6129436,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_5c94a1afab9d5266.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":3.70413800010283,"result_chars":15,"truncated":false}',1.79641069561294364925e+09);
INSERT INTO "events" VALUES(5,'ev_5b1cad976ba2d15e','golden-graph','f16233ccf9bc753373af5dae72d22596','run_3e6a640aa3a337c7','tool_called','{"id":"ev_5b1cad976ba2d15e","ts":1796410695.6169975,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_5c94a1afab9d5266.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.2910059999976511,"result_chars":14,"truncated":false}',1.79641069561699748043e+09);
INSERT INTO "events" VALUES(6,'ev_165b1c22ad570b67','golden-graph','f16233ccf9bc753373af5dae72d22596','run_3e6a640aa3a337c7','interrupt_raised','{"id":"ev_165b1c22ad570b67","ts":1796410695.6183236,"trace_id":"f16233ccf9bc753373af5dae72d22596","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_fe63c73d00a5c000","session_id":"golden-graph","run_id":"run_3e6a640aa3a337c7","trace_id":"f16233ccf9bc753373af5dae72d22596","agent":"graph","call_id":"call_5c94a1afab9d5266","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796410695.6183093}}',1.79641069561832356451e+09);
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
INSERT INTO "messages" VALUES(1,'msg_151943320332dc24','golden-graph','run_3e6a640aa3a337c7','user',NULL,'{"id":"msg_151943320332dc24","role":"user","content":"{\"order_id\": \"ORD-42\"}","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_3e6a640aa3a337c7","ts":1796410695.6057432}',1.79641069560574316976e+09);
INSERT INTO "messages" VALUES(2,'msg_fb9db3afbb9bb1be','golden-graph','run_3e6a640aa3a337c7','assistant','graph','{"id":"msg_fb9db3afbb9bb1be","role":"assistant","content":null,"agent":"graph","tool_calls":[{"id":"call_5c94a1afab9d5266","name":"checkout","arguments":"{\"step\": 0}"}],"tool_call_id":null,"name":null,"run_id":"run_3e6a640aa3a337c7","ts":1796410695.6065981}',1.79641069560659813876e+09);
CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            user_id TEXT,
            holder TEXT,
            holder_since TEXT,
            incoming TEXT,
            state TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        , version INTEGER NOT NULL DEFAULT 0, requests TEXT NOT NULL DEFAULT '{}');
INSERT INTO "sessions" VALUES('golden-graph',NULL,NULL,NULL,NULL,'{}',1.79641069560526132585e+09,1.79641069560526251791e+09,1,'{}');
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
INSERT INTO "snapshots" VALUES('golden-graph','run_3e6a640aa3a337c7:0',1,'run_3e6a640aa3a337c7',0,NULL,'{"state": {"log": [], "order_id": "ORD-42"}, "next": ["checkout"], "path": []}',1.79641069560596704484e+09);
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
