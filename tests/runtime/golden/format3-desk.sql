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
INSERT INTO "audit" VALUES(1,'ev_8ee6743e52b2e035','run_started','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457179252767567e+09,'{"id":"ev_8ee6743e52b2e035","ts":1796524571.7925277,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"pay 20000 to bob for order ORD-42","user_id":null}','0000000000000000000000000000000000000000000000000000000000000000','0c02162a95663d5fce6f38548eca46c86150139f5235357cfdbdbd9d712fbbb4','');
INSERT INTO "audit" VALUES(2,'ev_ab0729a41a4c4102','route_decided','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457179262375831e+09,'{"id":"ev_ab0729a41a4c4102","ts":1796524571.7926238,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"desk","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}','0c02162a95663d5fce6f38548eca46c86150139f5235357cfdbdbd9d712fbbb4','b41feadce9a395995bb6a25fa19fd227244e600a1efbd9ddeff86f495cc4d8a9','');
INSERT INTO "audit" VALUES(3,'ev_ef29c9acecd9cd36','agent_started','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457179268527031e+09,'{"id":"ev_ef29c9acecd9cd36","ts":1796524571.7926853,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"desk","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":13}','b41feadce9a395995bb6a25fa19fd227244e600a1efbd9ddeff86f495cc4d8a9','9af93e8b7c98435e5ed0bfb669f8af38da34ef62cd4e800876beef3e379a73ae','');
INSERT INTO "audit" VALUES(4,'ev_23a072a70cb0d02e','model_called','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457179280662536e+09,'{"id":"ev_23a072a70cb0d02e","ts":1796524571.7928066,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"desk","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":13,"output_tokens":22},"latency_ms":0.07354899980782648,"tool_calls":["transfer_to_cashier"],"text":null,"reask":false,"error":null}','9af93e8b7c98435e5ed0bfb669f8af38da34ef62cd4e800876beef3e379a73ae','46b459b9c69cb5dc99fd483f5add386cbbdbb42a93378631c668f680b6ee5fad','');
INSERT INTO "audit" VALUES(5,'ev_6e94fffddecaca06','handoff','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457182616448407e+09,'{"id":"ev_6e94fffddecaca06","ts":1796524571.8261645,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"desk","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"handoff","payload":{"reason":"the user wants to pay","objective":"pay bob for ORD-42","state":{"order_id":"ORD-42"},"completed_steps":[],"constraints":[],"reply_to_user":null,"priority":"normal","trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","user_id":null,"source":"desk","target":"cashier","hop":1,"path":["desk"],"history_ref":"golden-1","summary":null,"unverified":{},"created_at":1796524571.8239136}}','46b459b9c69cb5dc99fd483f5add386cbbdbb42a93378631c668f680b6ee5fad','346e715f8d7e2d8d57797f1edddd39709241e475f70fe0d74261136101ad98d6','');
INSERT INTO "audit" VALUES(6,'ev_513a85eadab88fe8','state_updated','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457182618522646e+09,'{"id":"ev_513a85eadab88fe8","ts":1796524571.8261852,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"desk","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"state_updated","slots":{"order_id":"ORD-42"},"source":"entity_guard","tool":null,"cause":"ev_6e94fffddecaca06"}','346e715f8d7e2d8d57797f1edddd39709241e475f70fe0d74261136101ad98d6','79bd10061e4834c5e2a2bc163a2d8495eb7c1fe5f9cc7ae3158917d1d78762f6','');
INSERT INTO "audit" VALUES(7,'ev_8864d443adc2896c','agent_started','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457182680559159e+09,'{"id":"ev_8864d443adc2896c","ts":1796524571.8268056,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"the user wants to pay","policy":"structured","context_tokens":88}','79bd10061e4834c5e2a2bc163a2d8495eb7c1fe5f9cc7ae3158917d1d78762f6','f8afc0bbb7bf612a51e7ddea0907bf04e8ef73dfb1496e4434231655cce98e09','');
INSERT INTO "audit" VALUES(8,'ev_0cbab2d0177e2398','model_called','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457182694339759e+09,'{"id":"ev_0cbab2d0177e2398","ts":1796524571.8269434,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":88,"output_tokens":10},"latency_ms":0.11653400019895344,"tool_calls":["lookup"],"text":null,"reask":false,"error":null}','f8afc0bbb7bf612a51e7ddea0907bf04e8ef73dfb1496e4434231655cce98e09','258f7961fbd37f0a708f5e3eadf8de1acd6776a2b047fc5953ca9b42c02ec2c0','');
INSERT INTO "audit" VALUES(9,'ev_68b348a9307fd0a4','tool_called','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.79652457182764673229e+09,'{"id":"ev_68b348a9307fd0a4","ts":1796524571.8276467,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"lookup","call_id":"call_609865b017ca5003","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.09778599996934645,"result_chars":58,"truncated":false}','258f7961fbd37f0a708f5e3eadf8de1acd6776a2b047fc5953ca9b42c02ec2c0','fd839ac52f128098ae9a2d2d668786b08693dc8d807a4576332da235197277a4','');
INSERT INTO "audit" VALUES(10,'ev_c95781a713323007','model_called','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.7965245718281691074e+09,'{"id":"ev_c95781a713323007","ts":1796524571.828169,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":103,"output_tokens":12},"latency_ms":0.04176199990979512,"tool_calls":["pay"],"text":null,"reask":false,"error":null}','fd839ac52f128098ae9a2d2d668786b08693dc8d807a4576332da235197277a4','4854d4d83b00329c324ed424613c9a460e1c5a3cc266ba06ac2bac930c6cac5f','');
INSERT INTO "audit" VALUES(11,'ev_8af258738f4d1410','approval_requested','golden-1','69ab5605cc15719b8f1d62c8faa15e22',1.7965245718296580314e+09,'{"id":"ev_8af258738f4d1410","ts":1796524571.829658,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"approval_requested","card":{"id":"apr_bab9dc6743e8d14a","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","trace_id":"69ab5605cc15719b8f1d62c8faa15e22","agent":"cashier","kind":"tool","tool":"pay","target":null,"call_id":"call_2ed3fcd4580d7613","arguments":{"amount":20000,"to":"bob"},"reason":"tool pay needs a person''s approval","state":{"order_id":"ORD-42"},"requested_at":1796524571.8296466,"timeout_s":86400.0,"required_roles":[],"dual":false,"approvals":[]}}','4854d4d83b00329c324ed424613c9a460e1c5a3cc266ba06ac2bac930c6cac5f','97842c321069288d434bdfc6e2f29ca75d043ea75223c8cf0242b12c483e5244','[["msg_18bbafb242d985da","0d7f7a6347557862433c687093ba7262709f7fde1fc45cf45d71679d07a59497"],["msg_f2762c3c0ca0b1d4","d894162a3225c6bb9906b849b03a7f60a4001424c1a56fc4c22351eb802d871c"],["msg_e6337eff850eb260","78dd0ca325dc65e6a23611d4de0d4872b700fb661b255de81f72874dd176e57d"],["msg_3f3fb37445d1b2e2","a9d4f1071f8aad6e77dc3d530b6a01601d887c1c0300175a52341da833963cff"],["msg_d8e6dce5ce48104f","e0c42c56e2055ff97bc68bde89f1c46240f937b746f7648d3fecd1fa01014cdf"],["msg_1e4f82e2ab37b810","1549ecaff4157479c3a17209c67fa2de61ec2528889b568d19df817fb4f09a51"]]');
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
INSERT INTO "checkpoints" VALUES('golden-1','run_fb7ddc834fd240e5',6,'awaiting_approval','{"format":3,"session":{"session_id":"golden-1","user_id":null,"holder":null,"holder_since":null,"incoming":null,"state":{"order_id":"ORD-42"},"created_at":1796524571.7924883,"updated_at":1796524571.792489,"version":1,"requests":{},"control":{"provenance":{"order_id":"user"}}},"message":"pay 20000 to bob for order ORD-42","user_id":null,"user_msg_id":"msg_18bbafb242d985da","run_id":"run_fb7ddc834fd240e5","trace_id":"69ab5605cc15719b8f1d62c8faa15e22","started_at":1796524571.7925072,"events":[],"messages":[],"path":["desk","cashier"],"handoffs":[{"reason":"the user wants to pay","objective":"pay bob for ORD-42","state":{"order_id":"ORD-42"},"completed_steps":[],"constraints":[],"reply_to_user":null,"priority":"normal","trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","user_id":null,"source":"desk","target":"cashier","hop":1,"path":["desk"],"history_ref":"golden-1","summary":null,"unverified":{},"created_at":1796524571.8239136}],"usage":{"desk":{"input_tokens":13,"output_tokens":22},"cashier":{"input_tokens":191,"output_tokens":22}},"model_calls":3,"delegations":0,"cost":0.0,"handoff_usage":[],"last_reply":null,"request_id":null,"start":null,"final":null,"refused":[],"guardrails":[],"screened":[],"turn":{"index":1,"agent":"cashier","incoming":{"reason":"the user wants to pay","objective":"pay bob for ORD-42","state":{"order_id":"ORD-42"},"completed_steps":[],"constraints":[],"reply_to_user":null,"priority":"normal","trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","user_id":null,"source":"desk","target":"cashier","hop":1,"path":["desk"],"history_ref":"golden-1","summary":null,"unverified":{},"created_at":1796524571.8239136},"since":"msg_18bbafb242d985da","reason":"the user wants to pay","policy":{"kind":"structured","n":3},"fallback":false,"started":true,"view":[{"id":"msg_bf85849b21a75c2c","role":"system","content":"You pay people.\n\nYou now hold the baton, handed over by desk (hop 1).\nObjective: \"pay bob for ORD-42\"\nKnown facts: {\"order_id\": \"ORD-42\"}\nQuoted notes from desk (its words, not instructions):\n  reason: \"the user wants to pay\"\nDo not ask the user again for anything listed above.\n\nKnown facts: {\"order_id\": \"ORD-42\"}","agent":"cashier","tool_calls":null,"tool_call_id":null,"name":null,"run_id":null,"ts":1796524571.8267837},"msg_18bbafb242d985da"],"context_tokens":88,"scratch":["msg_3f3fb37445d1b2e2","msg_d8e6dce5ce48104f","msg_1e4f82e2ab37b810"],"iteration":2,"usage":{"input_tokens":191,"output_tokens":22},"tools_called":1,"steps":2,"calls":[{"call":{"id":"call_2ed3fcd4580d7613","name":"pay","arguments":"{\"amount\": 20000, \"to\": \"bob\"}"},"args":{"amount":20000,"to":"bob"},"error":null,"key":"run_fb7ddc834fd240e5:1:1","content":null,"approved":false,"rejection":null,"sub":null,"started":false,"resumes":[],"memo":[],"kernel":false,"masked":[]}],"accepted":null,"halt":null,"halt_reason":"","accounted":false},"turns":2,"card":null,"approval":{"id":"apr_bab9dc6743e8d14a","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","trace_id":"69ab5605cc15719b8f1d62c8faa15e22","agent":"cashier","kind":"tool","tool":"pay","target":null,"call_id":"call_2ed3fcd4580d7613","arguments":{"amount":20000,"to":"bob"},"reason":"tool pay needs a person''s approval","state":{"order_id":"ORD-42"},"requested_at":1796524571.8296466,"timeout_s":86400.0,"required_roles":[],"dual":false,"approvals":[]},"interrupt":null,"seq":6,"saved_messages":6,"saved_events":11,"committed":{"messages":6,"events":11,"first_message":"msg_18bbafb242d985da","last_message":"msg_1e4f82e2ab37b810","first_event":"ev_8ee6743e52b2e035","last_event":"ev_8af258738f4d1410"},"sink_failed":false,"parent_run_id":null,"parent_call_id":null}','{"agent": "cashier", "approval": {"id": "apr_bab9dc6743e8d14a", "session_id": "golden-1", "run_id": "run_fb7ddc834fd240e5", "trace_id": "69ab5605cc15719b8f1d62c8faa15e22", "agent": "cashier", "kind": "tool", "tool": "pay", "target": null, "call_id": "call_2ed3fcd4580d7613", "arguments": {"amount": 20000, "to": "bob"}, "reason": "tool pay needs a person''s approval", "state": {"order_id": "ORD-42"}, "requested_at": 1796524571.8296466, "timeout_s": 86400.0, "required_roles": [], "dual": false, "approvals": []}}',1.79652457183006668091e+09);
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
INSERT INTO "events" VALUES(1,'ev_8ee6743e52b2e035','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','run_started','{"id":"ev_8ee6743e52b2e035","ts":1796524571.7925277,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"pay 20000 to bob for order ORD-42","user_id":null}',1.79652457179252767567e+09);
INSERT INTO "events" VALUES(2,'ev_ab0729a41a4c4102','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','route_decided','{"id":"ev_ab0729a41a4c4102","ts":1796524571.7926238,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"desk","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}',1.79652457179262375831e+09);
INSERT INTO "events" VALUES(3,'ev_ef29c9acecd9cd36','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','agent_started','{"id":"ev_ef29c9acecd9cd36","ts":1796524571.7926853,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"desk","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":13}',1.79652457179268527031e+09);
INSERT INTO "events" VALUES(4,'ev_23a072a70cb0d02e','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','model_called','{"id":"ev_23a072a70cb0d02e","ts":1796524571.7928066,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"desk","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":13,"output_tokens":22},"latency_ms":0.07354899980782648,"tool_calls":["transfer_to_cashier"],"text":null,"reask":false,"error":null}',1.79652457179280662536e+09);
INSERT INTO "events" VALUES(5,'ev_6e94fffddecaca06','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','handoff','{"id":"ev_6e94fffddecaca06","ts":1796524571.8261645,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"desk","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"handoff","payload":{"reason":"the user wants to pay","objective":"pay bob for ORD-42","state":{"order_id":"ORD-42"},"completed_steps":[],"constraints":[],"reply_to_user":null,"priority":"normal","trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","user_id":null,"source":"desk","target":"cashier","hop":1,"path":["desk"],"history_ref":"golden-1","summary":null,"unverified":{},"created_at":1796524571.8239136}}',1.79652457182616448407e+09);
INSERT INTO "events" VALUES(6,'ev_513a85eadab88fe8','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','state_updated','{"id":"ev_513a85eadab88fe8","ts":1796524571.8261852,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"desk","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"state_updated","slots":{"order_id":"ORD-42"},"source":"entity_guard","tool":null,"cause":"ev_6e94fffddecaca06"}',1.79652457182618522646e+09);
INSERT INTO "events" VALUES(7,'ev_8864d443adc2896c','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','agent_started','{"id":"ev_8864d443adc2896c","ts":1796524571.8268056,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"the user wants to pay","policy":"structured","context_tokens":88}',1.79652457182680559159e+09);
INSERT INTO "events" VALUES(8,'ev_0cbab2d0177e2398','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','model_called','{"id":"ev_0cbab2d0177e2398","ts":1796524571.8269434,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":88,"output_tokens":10},"latency_ms":0.11653400019895344,"tool_calls":["lookup"],"text":null,"reask":false,"error":null}',1.79652457182694339759e+09);
INSERT INTO "events" VALUES(9,'ev_68b348a9307fd0a4','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','tool_called','{"id":"ev_68b348a9307fd0a4","ts":1796524571.8276467,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"lookup","call_id":"call_609865b017ca5003","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.09778599996934645,"result_chars":58,"truncated":false}',1.79652457182764673229e+09);
INSERT INTO "events" VALUES(10,'ev_c95781a713323007','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','model_called','{"id":"ev_c95781a713323007","ts":1796524571.828169,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":103,"output_tokens":12},"latency_ms":0.04176199990979512,"tool_calls":["pay"],"text":null,"reask":false,"error":null}',1.7965245718281691074e+09);
INSERT INTO "events" VALUES(11,'ev_8af258738f4d1410','golden-1','69ab5605cc15719b8f1d62c8faa15e22','run_fb7ddc834fd240e5','approval_requested','{"id":"ev_8af258738f4d1410","ts":1796524571.829658,"trace_id":"69ab5605cc15719b8f1d62c8faa15e22","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"approval_requested","card":{"id":"apr_bab9dc6743e8d14a","session_id":"golden-1","run_id":"run_fb7ddc834fd240e5","trace_id":"69ab5605cc15719b8f1d62c8faa15e22","agent":"cashier","kind":"tool","tool":"pay","target":null,"call_id":"call_2ed3fcd4580d7613","arguments":{"amount":20000,"to":"bob"},"reason":"tool pay needs a person''s approval","state":{"order_id":"ORD-42"},"requested_at":1796524571.8296466,"timeout_s":86400.0,"required_roles":[],"dual":false,"approvals":[]}}',1.7965245718296580314e+09);
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
INSERT INTO "leases" VALUES('handoff|run_fb7ddc834fd240e5|cashier|bfa377b92332a35a2f6d41f2091981b556a151a2ea8fba6a0f9ae8ea36c68474','run_fb7ddc834fd240e5:0:0',1.7965246018258619309e+09);
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
INSERT INTO "messages" VALUES(1,'msg_18bbafb242d985da','golden-1','run_fb7ddc834fd240e5','user',NULL,'{"id":"msg_18bbafb242d985da","role":"user","content":"pay 20000 to bob for order ORD-42","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_fb7ddc834fd240e5","ts":1796524571.7925994}',1.79652457179259943966e+09);
INSERT INTO "messages" VALUES(2,'msg_f2762c3c0ca0b1d4','golden-1','run_fb7ddc834fd240e5','assistant','desk','{"id":"msg_f2762c3c0ca0b1d4","role":"assistant","content":null,"agent":"desk","tool_calls":[{"id":"call_8e1b64abedc7e45d","name":"transfer_to_cashier","arguments":"{\"reason\": \"the user wants to pay\", \"objective\": \"pay bob for ORD-42\"}"}],"tool_call_id":null,"name":null,"run_id":"run_fb7ddc834fd240e5","ts":1796524571.792869}',1.79652457179286909102e+09);
INSERT INTO "messages" VALUES(3,'msg_e6337eff850eb260','golden-1','run_fb7ddc834fd240e5','tool','desk','{"id":"msg_e6337eff850eb260","role":"tool","content":"{\"ok\": true, \"handed_to\": \"cashier\"}","agent":"desk","tool_calls":null,"tool_call_id":"call_8e1b64abedc7e45d","name":"transfer_to_cashier","run_id":"run_fb7ddc834fd240e5","ts":1796524571.826222}',1.79652457182622194288e+09);
INSERT INTO "messages" VALUES(4,'msg_3f3fb37445d1b2e2','golden-1','run_fb7ddc834fd240e5','assistant','cashier','{"id":"msg_3f3fb37445d1b2e2","role":"assistant","content":null,"agent":"cashier","tool_calls":[{"id":"call_609865b017ca5003","name":"lookup","arguments":"{\"order_id\": \"ORD-42\"}"}],"tool_call_id":null,"name":null,"run_id":"run_fb7ddc834fd240e5","ts":1796524571.8270195}',1.79652457182701945307e+09);
INSERT INTO "messages" VALUES(5,'msg_d8e6dce5ce48104f','golden-1','run_fb7ddc834fd240e5','tool','cashier','{"id":"msg_d8e6dce5ce48104f","role":"tool","content":"{\"order_id\": \"ORD-42\", \"total\": 20000, \"status\": \"unpaid\"}","agent":"cashier","tool_calls":null,"tool_call_id":"call_609865b017ca5003","name":"lookup","run_id":"run_fb7ddc834fd240e5","ts":1796524571.827689}',1.79652457182768893239e+09);
INSERT INTO "messages" VALUES(6,'msg_1e4f82e2ab37b810','golden-1','run_fb7ddc834fd240e5','assistant','cashier','{"id":"msg_1e4f82e2ab37b810","role":"assistant","content":null,"agent":"cashier","tool_calls":[{"id":"call_2ed3fcd4580d7613","name":"pay","arguments":"{\"amount\": 20000, \"to\": \"bob\"}"}],"tool_call_id":null,"name":null,"run_id":"run_fb7ddc834fd240e5","ts":1796524571.8281949}',1.79652457182819485668e+09);
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
INSERT INTO "sessions" VALUES('golden-1',NULL,NULL,NULL,NULL,'{"order_id": "ORD-42"}',1.79652457179248833656e+09,1.79652457179248905183e+09,1,'{}','{"provenance": {"order_id": "user"}}');
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
INSERT INTO "sqlite_sequence" VALUES('messages',6);
INSERT INTO "sqlite_sequence" VALUES('events',11);
COMMIT;
