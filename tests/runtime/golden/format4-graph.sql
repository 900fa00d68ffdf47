PRAGMA user_version = 12;
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
INSERT INTO "audit" VALUES(1,'ev_c34ef308dd515ad8','run_started','golden-graph','246c054401012af306d2cd7d3a1662a5',1.79661376166119337088e+09,'{"id":"ev_c34ef308dd515ad8","ts":1796613761.6611934,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null}','0000000000000000000000000000000000000000000000000000000000000000','5dfae0b2751cefde44f557c32702cff3ecb4d95c367787a6cc45e383cf767402','');
INSERT INTO "audit" VALUES(2,'ev_ae893404129b285f','route_decided','golden-graph','246c054401012af306d2cd7d3a1662a5',1.79661376166123938559e+09,'{"id":"ev_ae893404129b285f","ts":1796613761.6612394,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}','5dfae0b2751cefde44f557c32702cff3ecb4d95c367787a6cc45e383cf767402','896255980ccacc4e427d59ef4ae7303b7b07034ee195a42ca94633cf8900aee0','');
INSERT INTO "audit" VALUES(3,'ev_3150fd36bbccd9bf','agent_started','golden-graph','246c054401012af306d2cd7d3a1662a5',1.79661376166130590443e+09,'{"id":"ev_3150fd36bbccd9bf","ts":1796613761.661306,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33,"conductor":true}','896255980ccacc4e427d59ef4ae7303b7b07034ee195a42ca94633cf8900aee0','3f8e8818ba39dbcbad6608e739e2beccb91b84352c2715d0e9717df8326254b5','');
INSERT INTO "audit" VALUES(4,'ev_e54d7f0d6a1c4847','tool_called','golden-graph','246c054401012af306d2cd7d3a1662a5',1.79661376166339373586e+09,'{"id":"ev_e54d7f0d6a1c4847","ts":1796613761.6633937,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_ae1e503b164d8c8f.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.4110300001229916,"result_chars":15,"truncated":false,"reused":null}','3f8e8818ba39dbcbad6608e739e2beccb91b84352c2715d0e9717df8326254b5','8432fc2276725ce6f3e4a37679ebdb51a51b7aae41eaf3a31cf9df791203c19b','');
INSERT INTO "audit" VALUES(5,'ev_a30d94e1dd23a64e','tool_called','golden-graph','246c054401012af306d2cd7d3a1662a5',1.79661376166459703452e+09,'{"id":"ev_a30d94e1dd23a64e","ts":1796613761.664597,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_ae1e503b164d8c8f.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.14502500016533304,"result_chars":14,"truncated":false,"reused":null}','8432fc2276725ce6f3e4a37679ebdb51a51b7aae41eaf3a31cf9df791203c19b','c27a07ac6d21f0aa749e51368e1a4c8d9f1ff3e862509c1767b849cb3d88602e','');
INSERT INTO "audit" VALUES(6,'ev_8440439f1d38cb37','interrupt_raised','golden-graph','246c054401012af306d2cd7d3a1662a5',1.79661376166524338728e+09,'{"id":"ev_8440439f1d38cb37","ts":1796613761.6652434,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_92de60b18a1ca2f9","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","trace_id":"246c054401012af306d2cd7d3a1662a5","agent":"graph","call_id":"call_ae1e503b164d8c8f","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796613761.6652355}}','c27a07ac6d21f0aa749e51368e1a4c8d9f1ff3e862509c1767b849cb3d88602e','95a3f8e8586fc60726175e2fce2647221f1f944d828e41d7e6f4f3b7bbfb9a74','[["msg_833d6bcf22beccbc","c5b3622a42403b6cce6ce901cf94d7dfe1f2b5daed89597706cce4e3e165105b"],["msg_2da5b1d359a7915d","e75103b75d469a2960af00695e60e82dfb7a0c3c9de3494ebdb6045b32cb180f"]]');
CREATE TABLE audit_anchor (
            first_seq INTEGER NOT NULL,
            seq INTEGER PRIMARY KEY,
            hash TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            archived_at REAL NOT NULL,
            prev_seal TEXT NOT NULL,
            seal TEXT NOT NULL
        );
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
INSERT INTO "checkpoints" VALUES('golden-graph','run_9bb6d94351ee9bca',4,'interrupted','{"format":4,"session":{"session_id":"golden-graph","user_id":null,"holder":null,"holder_since":null,"incoming":null,"state":{},"created_at":1796613761.6608727,"updated_at":1796613761.6608732,"version":1,"requests":{},"control":{}},"message":"{\"order_id\": \"ORD-42\"}","user_id":null,"user_msg_id":"msg_833d6bcf22beccbc","run_id":"run_9bb6d94351ee9bca","trace_id":"246c054401012af306d2cd7d3a1662a5","started_at":1796613761.6611807,"events":[],"messages":[],"path":["graph"],"handoffs":[],"usage":{},"model_calls":0,"delegations":0,"citations":[],"cited_in":[],"cost":0.0,"handoff_usage":[],"last_reply":null,"request_id":null,"start":{"state":{"log":[],"order_id":""},"input":{"order_id":"ORD-42"},"step":0,"parent":null},"final":null,"refused":[],"guardrails":[],"screened":[],"turn":{"index":0,"agent":"graph","incoming":null,"since":"msg_833d6bcf22beccbc","reason":"entry agent","policy":null,"fallback":false,"started":true,"view":[{"id":"msg_ae8987e507555bfe","role":"system","content":"You are graph.\n\nYour final answer is JSON only, of this shape: {\"log\"?: [string, ...], \"order_id\"?: string}","agent":"graph","tool_calls":null,"tool_call_id":null,"name":null,"run_id":null,"ts":1796613761.6612837},"msg_833d6bcf22beccbc"],"context_tokens":33,"scratch":["msg_2da5b1d359a7915d"],"iteration":1,"usage":{"input_tokens":0,"output_tokens":0},"tools_called":0,"steps":1,"calls":[{"call":{"id":"call_ae1e503b164d8c8f","name":"checkout","arguments":"{\"step\": 0}"},"args":{"step":0},"error":null,"key":"run_9bb6d94351ee9bca:0:0","content":null,"approved":false,"rejection":null,"sub":null,"started":true,"resumes":[],"memo":[{"step":"reserve","result":"reserved ORD-42"},{"step":"charge","result":"charged ORD-42"}],"kernel":false,"masked":[]}],"accepted":null,"halt":null,"halt_reason":"","accounted":false},"turns":1,"card":null,"approval":null,"interrupt":{"id":"int_92de60b18a1ca2f9","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","trace_id":"246c054401012af306d2cd7d3a1662a5","agent":"graph","call_id":"call_ae1e503b164d8c8f","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796613761.6652355},"seq":4,"saved_messages":2,"saved_events":6,"committed":{"messages":2,"events":6,"first_message":"msg_833d6bcf22beccbc","last_message":"msg_2da5b1d359a7915d","first_event":"ev_c34ef308dd515ad8","last_event":"ev_8440439f1d38cb37"},"sink_failed":false,"parent_run_id":null,"parent_call_id":null}','{"agent": "graph", "interrupt": {"id": "int_92de60b18a1ca2f9", "session_id": "golden-graph", "run_id": "run_9bb6d94351ee9bca", "trace_id": "246c054401012af306d2cd7d3a1662a5", "agent": "graph", "call_id": "call_ae1e503b164d8c8f", "name": "checkout", "value": "ship ORD-42?", "index": 0, "created_at": 1796613761.6652355}}',1.79661376166559386257e+09);
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
INSERT INTO "events" VALUES(1,'ev_c34ef308dd515ad8','golden-graph','246c054401012af306d2cd7d3a1662a5','run_9bb6d94351ee9bca','run_started','{"id":"ev_c34ef308dd515ad8","ts":1796613761.6611934,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"{\"order_id\": \"ORD-42\"}","user_id":null}',1.79661376166119337088e+09);
INSERT INTO "events" VALUES(2,'ev_ae893404129b285f','golden-graph','246c054401012af306d2cd7d3a1662a5','run_9bb6d94351ee9bca','route_decided','{"id":"ev_ae893404129b285f","ts":1796613761.6612394,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"graph","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}',1.79661376166123938559e+09);
INSERT INTO "events" VALUES(3,'ev_3150fd36bbccd9bf','golden-graph','246c054401012af306d2cd7d3a1662a5','run_9bb6d94351ee9bca','agent_started','{"id":"ev_3150fd36bbccd9bf","ts":1796613761.661306,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":33,"conductor":true}',1.79661376166130590443e+09);
INSERT INTO "events" VALUES(4,'ev_e54d7f0d6a1c4847','golden-graph','246c054401012af306d2cd7d3a1662a5','run_9bb6d94351ee9bca','tool_called','{"id":"ev_e54d7f0d6a1c4847","ts":1796613761.6633937,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"reserve","call_id":"call_ae1e503b164d8c8f.0","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.4110300001229916,"result_chars":15,"truncated":false,"reused":null}',1.79661376166339373586e+09);
INSERT INTO "events" VALUES(5,'ev_a30d94e1dd23a64e','golden-graph','246c054401012af306d2cd7d3a1662a5','run_9bb6d94351ee9bca','tool_called','{"id":"ev_a30d94e1dd23a64e","ts":1796613761.664597,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"charge","call_id":"call_ae1e503b164d8c8f.1","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.14502500016533304,"result_chars":14,"truncated":false,"reused":null}',1.79661376166459703452e+09);
INSERT INTO "events" VALUES(6,'ev_8440439f1d38cb37','golden-graph','246c054401012af306d2cd7d3a1662a5','run_9bb6d94351ee9bca','interrupt_raised','{"id":"ev_8440439f1d38cb37","ts":1796613761.6652434,"trace_id":"246c054401012af306d2cd7d3a1662a5","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","agent":"graph","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"interrupt_raised","card":{"id":"int_92de60b18a1ca2f9","session_id":"golden-graph","run_id":"run_9bb6d94351ee9bca","trace_id":"246c054401012af306d2cd7d3a1662a5","agent":"graph","call_id":"call_ae1e503b164d8c8f","name":"checkout","value":"ship ORD-42?","index":0,"created_at":1796613761.6652355}}',1.79661376166524338728e+09);
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
INSERT INTO "messages" VALUES(1,'msg_833d6bcf22beccbc','golden-graph','run_9bb6d94351ee9bca','user',NULL,'{"id":"msg_833d6bcf22beccbc","role":"user","content":"{\"order_id\": \"ORD-42\"}","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_9bb6d94351ee9bca","ts":1796613761.661208}',1.79661376166120791437e+09);
INSERT INTO "messages" VALUES(2,'msg_2da5b1d359a7915d','golden-graph','run_9bb6d94351ee9bca','assistant','graph','{"id":"msg_2da5b1d359a7915d","role":"assistant","content":null,"agent":"graph","tool_calls":[{"id":"call_ae1e503b164d8c8f","name":"checkout","arguments":"{\"step\": 0}"}],"tool_call_id":null,"name":null,"run_id":"run_9bb6d94351ee9bca","ts":1796613761.6614034}',1.79661376166140341757e+09);
CREATE TABLE outbox (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    ts REAL NOT NULL,
    event TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    deliveries TEXT NOT NULL DEFAULT '[]',
    created_at REAL NOT NULL
);
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
INSERT INTO "sessions" VALUES('golden-graph',NULL,NULL,NULL,NULL,'{}',1.79661376166087269779e+09,1.79661376166087317462e+09,1,'{}','{}');
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
INSERT INTO "snapshots" VALUES('golden-graph','run_9bb6d94351ee9bca:0',1,'run_9bb6d94351ee9bca',0,NULL,'{"state": {"log": [], "order_id": "ORD-42"}, "next": ["checkout"], "path": []}',1.79661376166137313841e+09);
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
CREATE INDEX audit_session ON audit (session_id, seq);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
CREATE INDEX checkpoints_status ON checkpoints (status, updated_at);
CREATE INDEX leases_expiry ON leases (expires_at);
CREATE INDEX tasks_session ON tasks (session_id);
CREATE INDEX tasks_status ON tasks (status);
CREATE INDEX board_changes ON board (board, seq);
CREATE UNIQUE INDEX snapshots_seq ON snapshots (thread_id, seq);
CREATE TRIGGER audit_anchor_no_update BEFORE UPDATE ON audit_anchor
        BEGIN SELECT RAISE(ABORT, 'audit anchors are append-only'); END;
CREATE TRIGGER audit_anchor_no_delete BEFORE DELETE ON audit_anchor
        BEGIN SELECT RAISE(ABORT, 'audit anchors are append-only'); END;
CREATE TRIGGER audit_anchor_follows BEFORE INSERT ON audit_anchor
        WHEN NEW.first_seq != COALESCE((SELECT MAX(seq) FROM audit_anchor), 0) + 1
            OR NEW.seq < NEW.first_seq
            OR NEW.prev_seal != COALESCE(
                (SELECT seal FROM audit_anchor ORDER BY seq DESC LIMIT 1), '0000000000000000000000000000000000000000000000000000000000000000')
            OR NOT EXISTS (SELECT 1 FROM audit WHERE seq = NEW.seq AND hash = NEW.hash)
        BEGIN SELECT RAISE(ABORT, 'an audit anchor must follow the last one and name a stored
            audit record by its hash'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        WHEN OLD.seq > COALESCE((SELECT MAX(seq) FROM audit_anchor), 0)
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
CREATE INDEX outbox_due ON outbox (status, next_at);
CREATE INDEX outbox_rate ON outbox (kind, key, ts);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('messages',2);
INSERT INTO "sqlite_sequence" VALUES('events',6);
COMMIT;
