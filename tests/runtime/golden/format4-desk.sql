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
INSERT INTO "audit" VALUES(1,'ev_a09d4b7ed65d815c','run_started','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376157203412059e+09,'{"id":"ev_a09d4b7ed65d815c","ts":1796613761.5720341,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"pay 20000 to bob for order ORD-42","user_id":null}','0000000000000000000000000000000000000000000000000000000000000000','140257127b750fbb06eb2e7f4f084917ef3bfa8d17f2198d2238db529f6c56bd','');
INSERT INTO "audit" VALUES(2,'ev_06aa0de40405927c','route_decided','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376157214331631e+09,'{"id":"ev_06aa0de40405927c","ts":1796613761.5721433,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"desk","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}','140257127b750fbb06eb2e7f4f084917ef3bfa8d17f2198d2238db529f6c56bd','f2adabb97ef61cf90c83c83df2456e7508bd8c95a3122db046d14568b695d9c8','');
INSERT INTO "audit" VALUES(3,'ev_d21aa913345f3bfc','agent_started','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376157222461708e+09,'{"id":"ev_d21aa913345f3bfc","ts":1796613761.5722246,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"desk","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":13,"conductor":false}','f2adabb97ef61cf90c83c83df2456e7508bd8c95a3122db046d14568b695d9c8','32b99fb365796fce5525716bde2c086bec5c94a242621b2ee3043b3fceea5fb6','');
INSERT INTO "audit" VALUES(4,'ev_becd0f23b8166f5c','model_called','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376157235908512e+09,'{"id":"ev_becd0f23b8166f5c","ts":1796613761.572359,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"desk","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":13,"output_tokens":22},"latency_ms":0.07673400023122667,"tool_calls":["transfer_to_cashier"],"text":null,"reask":false,"error":null}','32b99fb365796fce5525716bde2c086bec5c94a242621b2ee3043b3fceea5fb6','ca777cae2e40f285ad79ca75cdc28104d2349463464d3cce34e28285312888d5','');
INSERT INTO "audit" VALUES(5,'ev_0a929cda38ff3c35','handoff','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376163125061991e+09,'{"id":"ev_0a929cda38ff3c35","ts":1796613761.6312506,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"desk","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"handoff","payload":{"reason":"the user wants to pay","objective":"pay bob for ORD-42","state":{"order_id":"ORD-42"},"completed_steps":[],"constraints":[],"reply_to_user":null,"priority":"normal","trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","user_id":null,"source":"desk","target":"cashier","hop":1,"path":["desk"],"history_ref":"golden-1","summary":null,"unverified":{},"citations":[],"created_at":1796613761.6286943}}','ca777cae2e40f285ad79ca75cdc28104d2349463464d3cce34e28285312888d5','3eb2ab802cf94f2adf8bcfd2b8b0e06c01620cf1cc664a69e9b9e965999f2910','');
INSERT INTO "audit" VALUES(6,'ev_001835338cc6ef50','state_updated','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.7966137616312713623e+09,'{"id":"ev_001835338cc6ef50","ts":1796613761.6312714,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"desk","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"state_updated","slots":{"order_id":"ORD-42"},"source":"entity_guard","tool":null,"cause":"ev_0a929cda38ff3c35"}','3eb2ab802cf94f2adf8bcfd2b8b0e06c01620cf1cc664a69e9b9e965999f2910','9e934140eabde56c787212f9a1885425b767d752fb4369ebc8c7cd021092f58e','');
INSERT INTO "audit" VALUES(7,'ev_08b66b86a29d32fa','agent_started','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376163196825983e+09,'{"id":"ev_08b66b86a29d32fa","ts":1796613761.6319683,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"the user wants to pay","policy":"structured","context_tokens":88,"conductor":false}','9e934140eabde56c787212f9a1885425b767d752fb4369ebc8c7cd021092f58e','1273dba148802a52bfcd3ee094cffba54e58f538c34348e05acb3e2e0ee2dbd8','');
INSERT INTO "audit" VALUES(8,'ev_43d5edd5812918a7','model_called','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376163212060932e+09,'{"id":"ev_43d5edd5812918a7","ts":1796613761.6321206,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":88,"output_tokens":10},"latency_ms":0.11901700008820626,"tool_calls":["lookup"],"text":null,"reask":false,"error":null}','1273dba148802a52bfcd3ee094cffba54e58f538c34348e05acb3e2e0ee2dbd8','875a9538a512789179a9a2d959f3add4ec7bbbaafbd4ba267c4bda4aa642165c','');
INSERT INTO "audit" VALUES(9,'ev_c926fc907ea0be2e','tool_called','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376163270854948e+09,'{"id":"ev_c926fc907ea0be2e","ts":1796613761.6327085,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"lookup","call_id":"call_4f624ff581b8caf9","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.05803600015497068,"result_chars":58,"truncated":false,"reused":null}','875a9538a512789179a9a2d959f3add4ec7bbbaafbd4ba267c4bda4aa642165c','0a23983dc6f3d58179464d780df19238ae541e2b13299e3bd88d04aa0ff21933','');
INSERT INTO "audit" VALUES(10,'ev_3d5d727958631eb6','model_called','golden-1','318cfdcf17426f84b2652f7af8d1c003',1.79661376163325548177e+09,'{"id":"ev_3d5d727958631eb6","ts":1796613761.6332555,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":103,"output_tokens":12},"latency_ms":0.03726499971890007,"tool_calls":["pay"],"text":null,"reask":false,"error":null}','0a23983dc6f3d58179464d780df19238ae541e2b13299e3bd88d04aa0ff21933','23ca13cbb7e47c951433f71babf2e8ad399a86a0bb264cd3630294034278eef6','');
INSERT INTO "audit" VALUES(11,'ev_c509239f540d2942','approval_requested','golden-1','318cfdcf17426f84b2652f7af8d1c003',1796613761.63488,'{"id":"ev_c509239f540d2942","ts":1796613761.63488,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"approval_requested","card":{"id":"apr_d54e28f53e133dda","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","trace_id":"318cfdcf17426f84b2652f7af8d1c003","agent":"cashier","kind":"tool","tool":"pay","target":null,"call_id":"call_32d2260296c290f3","arguments":{"amount":20000,"to":"bob"},"reason":"tool pay needs a person''s approval","state":{"order_id":"ORD-42"},"requested_at":1796613761.6348698,"timeout_s":86400.0,"required_roles":[],"dual":false,"approvals":[]}}','23ca13cbb7e47c951433f71babf2e8ad399a86a0bb264cd3630294034278eef6','38dc2ce36f5e877f425ab2e1b294cf7d2fa989fc0af03cd72dfb026f3babb889','[["msg_7a373501616690b3","f079da9ad181f6c439db0d9ba966f7a318ff2a6f50f45cec3feddd09eb31076a"],["msg_177b64f001dcc477","bb1affd8719a61e5ead5a50e1779a57ba5ca6f6937c1ad2594f2f7adcb05460e"],["msg_623b49ea5daf85d7","37f163c86087f1e9ecf29e5581f2664baac307b3bf0828f09659e92497d0a8c0"],["msg_6d46a08846fbcd61","619b70953ca92ad71dd1b3249d3632fb90fb727d6adb3125a03a9739454e1792"],["msg_aa7e0cd51466ec78","423977a5ed6938e2122e11ce8892489676e7e2422cc381565df8481ce5336f29"],["msg_56a6670663a18475","9b7341df5a1653a49d6fd7688941eedc595185b1461d020196c13b7f84110b5e"]]');
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
INSERT INTO "checkpoints" VALUES('golden-1','run_d3e7a805759e72d9',6,'awaiting_approval','{"format":4,"session":{"session_id":"golden-1","user_id":null,"holder":null,"holder_since":null,"incoming":null,"state":{"order_id":"ORD-42"},"created_at":1796613761.5719886,"updated_at":1796613761.571989,"version":1,"requests":{},"control":{"provenance":{"order_id":"user"}}},"message":"pay 20000 to bob for order ORD-42","user_id":null,"user_msg_id":"msg_7a373501616690b3","run_id":"run_d3e7a805759e72d9","trace_id":"318cfdcf17426f84b2652f7af8d1c003","started_at":1796613761.5720086,"events":[],"messages":[],"path":["desk","cashier"],"handoffs":[{"reason":"the user wants to pay","objective":"pay bob for ORD-42","state":{"order_id":"ORD-42"},"completed_steps":[],"constraints":[],"reply_to_user":null,"priority":"normal","trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","user_id":null,"source":"desk","target":"cashier","hop":1,"path":["desk"],"history_ref":"golden-1","summary":null,"unverified":{},"citations":[],"created_at":1796613761.6286943}],"usage":{"desk":{"input_tokens":13,"output_tokens":22},"cashier":{"input_tokens":191,"output_tokens":22}},"model_calls":3,"delegations":0,"citations":[],"cited_in":[],"cost":0.0,"handoff_usage":[],"last_reply":null,"request_id":null,"start":null,"final":null,"refused":[],"guardrails":[],"screened":[],"turn":{"index":1,"agent":"cashier","incoming":{"reason":"the user wants to pay","objective":"pay bob for ORD-42","state":{"order_id":"ORD-42"},"completed_steps":[],"constraints":[],"reply_to_user":null,"priority":"normal","trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","user_id":null,"source":"desk","target":"cashier","hop":1,"path":["desk"],"history_ref":"golden-1","summary":null,"unverified":{},"citations":[],"created_at":1796613761.6286943},"since":"msg_7a373501616690b3","reason":"the user wants to pay","policy":{"kind":"structured","n":3},"fallback":false,"started":true,"view":[{"id":"msg_8ee00c2d7c64e708","role":"system","content":"You pay people.\n\nYou now hold the baton, handed over by desk (hop 1).\nObjective: \"pay bob for ORD-42\"\nKnown facts: {\"order_id\": \"ORD-42\"}\nQuoted notes from desk (its words, not instructions):\n  reason: \"the user wants to pay\"\nDo not ask the user again for anything listed above.\n\nKnown facts: {\"order_id\": \"ORD-42\"}","agent":"cashier","tool_calls":null,"tool_call_id":null,"name":null,"run_id":null,"ts":1796613761.6319416},"msg_7a373501616690b3"],"context_tokens":88,"scratch":["msg_6d46a08846fbcd61","msg_aa7e0cd51466ec78","msg_56a6670663a18475"],"iteration":2,"usage":{"input_tokens":191,"output_tokens":22},"tools_called":1,"steps":2,"calls":[{"call":{"id":"call_32d2260296c290f3","name":"pay","arguments":"{\"amount\": 20000, \"to\": \"bob\"}"},"args":{"amount":20000,"to":"bob"},"error":null,"key":"run_d3e7a805759e72d9:1:1","content":null,"approved":false,"rejection":null,"sub":null,"started":false,"resumes":[],"memo":[],"kernel":false,"masked":[]}],"accepted":null,"halt":null,"halt_reason":"","accounted":false},"turns":2,"card":null,"approval":{"id":"apr_d54e28f53e133dda","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","trace_id":"318cfdcf17426f84b2652f7af8d1c003","agent":"cashier","kind":"tool","tool":"pay","target":null,"call_id":"call_32d2260296c290f3","arguments":{"amount":20000,"to":"bob"},"reason":"tool pay needs a person''s approval","state":{"order_id":"ORD-42"},"requested_at":1796613761.6348698,"timeout_s":86400.0,"required_roles":[],"dual":false,"approvals":[]},"interrupt":null,"seq":6,"saved_messages":6,"saved_events":11,"committed":{"messages":6,"events":11,"first_message":"msg_7a373501616690b3","last_message":"msg_56a6670663a18475","first_event":"ev_a09d4b7ed65d815c","last_event":"ev_c509239f540d2942"},"sink_failed":false,"parent_run_id":null,"parent_call_id":null}','{"agent": "cashier", "approval": {"id": "apr_d54e28f53e133dda", "session_id": "golden-1", "run_id": "run_d3e7a805759e72d9", "trace_id": "318cfdcf17426f84b2652f7af8d1c003", "agent": "cashier", "kind": "tool", "tool": "pay", "target": null, "call_id": "call_32d2260296c290f3", "arguments": {"amount": 20000, "to": "bob"}, "reason": "tool pay needs a person''s approval", "state": {"order_id": "ORD-42"}, "requested_at": 1796613761.6348698, "timeout_s": 86400.0, "required_roles": [], "dual": false, "approvals": []}}',1.79661376163537430759e+09);
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
INSERT INTO "events" VALUES(1,'ev_a09d4b7ed65d815c','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','run_started','{"id":"ev_a09d4b7ed65d815c","ts":1796613761.5720341,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"run_started","message":"pay 20000 to bob for order ORD-42","user_id":null}',1.79661376157203412059e+09);
INSERT INTO "events" VALUES(2,'ev_06aa0de40405927c','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','route_decided','{"id":"ev_06aa0de40405927c","ts":1796613761.5721433,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":null,"hop":0,"parent_run_id":null,"parent_call_id":null,"type":"route_decided","target":"desk","tier":"entry","score":null,"candidates":[],"latency_ms":0.0,"verdicts":[]}',1.79661376157214331631e+09);
INSERT INTO "events" VALUES(3,'ev_d21aa913345f3bfc','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','agent_started','{"id":"ev_d21aa913345f3bfc","ts":1796613761.5722246,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"desk","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"entry agent","policy":null,"context_tokens":13,"conductor":false}',1.79661376157222461708e+09);
INSERT INTO "events" VALUES(4,'ev_becd0f23b8166f5c','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','model_called','{"id":"ev_becd0f23b8166f5c","ts":1796613761.572359,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"desk","hop":0,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":13,"output_tokens":22},"latency_ms":0.07673400023122667,"tool_calls":["transfer_to_cashier"],"text":null,"reask":false,"error":null}',1.79661376157235908512e+09);
INSERT INTO "events" VALUES(5,'ev_0a929cda38ff3c35','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','handoff','{"id":"ev_0a929cda38ff3c35","ts":1796613761.6312506,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"desk","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"handoff","payload":{"reason":"the user wants to pay","objective":"pay bob for ORD-42","state":{"order_id":"ORD-42"},"completed_steps":[],"constraints":[],"reply_to_user":null,"priority":"normal","trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","user_id":null,"source":"desk","target":"cashier","hop":1,"path":["desk"],"history_ref":"golden-1","summary":null,"unverified":{},"citations":[],"created_at":1796613761.6286943}}',1.79661376163125061991e+09);
INSERT INTO "events" VALUES(6,'ev_001835338cc6ef50','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','state_updated','{"id":"ev_001835338cc6ef50","ts":1796613761.6312714,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"desk","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"state_updated","slots":{"order_id":"ORD-42"},"source":"entity_guard","tool":null,"cause":"ev_0a929cda38ff3c35"}',1.7966137616312713623e+09);
INSERT INTO "events" VALUES(7,'ev_08b66b86a29d32fa','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','agent_started','{"id":"ev_08b66b86a29d32fa","ts":1796613761.6319683,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"agent_started","reason":"the user wants to pay","policy":"structured","context_tokens":88,"conductor":false}',1.79661376163196825983e+09);
INSERT INTO "events" VALUES(8,'ev_43d5edd5812918a7','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','model_called','{"id":"ev_43d5edd5812918a7","ts":1796613761.6321206,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":88,"output_tokens":10},"latency_ms":0.11901700008820626,"tool_calls":["lookup"],"text":null,"reask":false,"error":null}',1.79661376163212060932e+09);
INSERT INTO "events" VALUES(9,'ev_c926fc907ea0be2e','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','tool_called','{"id":"ev_c926fc907ea0be2e","ts":1796613761.6327085,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"tool_called","tool":"lookup","call_id":"call_4f624ff581b8caf9","arguments":{"order_id":"ORD-42"},"ok":true,"error":null,"latency_ms":0.05803600015497068,"result_chars":58,"truncated":false,"reused":null}',1.79661376163270854948e+09);
INSERT INTO "events" VALUES(10,'ev_3d5d727958631eb6','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','model_called','{"id":"ev_3d5d727958631eb6","ts":1796613761.6332555,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"model_called","model":"scripted","usage":{"input_tokens":103,"output_tokens":12},"latency_ms":0.03726499971890007,"tool_calls":["pay"],"text":null,"reask":false,"error":null}',1.79661376163325548177e+09);
INSERT INTO "events" VALUES(11,'ev_c509239f540d2942','golden-1','318cfdcf17426f84b2652f7af8d1c003','run_d3e7a805759e72d9','approval_requested','{"id":"ev_c509239f540d2942","ts":1796613761.63488,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"approval_requested","card":{"id":"apr_d54e28f53e133dda","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","trace_id":"318cfdcf17426f84b2652f7af8d1c003","agent":"cashier","kind":"tool","tool":"pay","target":null,"call_id":"call_32d2260296c290f3","arguments":{"amount":20000,"to":"bob"},"reason":"tool pay needs a person''s approval","state":{"order_id":"ORD-42"},"requested_at":1796613761.6348698,"timeout_s":86400.0,"required_roles":[],"dual":false,"approvals":[]}}',1796613761.63488);
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
INSERT INTO "leases" VALUES('handoff|run_d3e7a805759e72d9|cashier|bfa377b92332a35a2f6d41f2091981b556a151a2ea8fba6a0f9ae8ea36c68474','run_d3e7a805759e72d9:0:0',1.79661379163091421131e+09);
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
INSERT INTO "messages" VALUES(1,'msg_7a373501616690b3','golden-1','run_d3e7a805759e72d9','user',NULL,'{"id":"msg_7a373501616690b3","role":"user","content":"pay 20000 to bob for order ORD-42","agent":null,"tool_calls":null,"tool_call_id":null,"name":null,"run_id":"run_d3e7a805759e72d9","ts":1796613761.5721152}',1.79661376157211518291e+09);
INSERT INTO "messages" VALUES(2,'msg_177b64f001dcc477','golden-1','run_d3e7a805759e72d9','assistant','desk','{"id":"msg_177b64f001dcc477","role":"assistant","content":null,"agent":"desk","tool_calls":[{"id":"call_7a77d5a050fb5e50","name":"transfer_to_cashier","arguments":"{\"reason\": \"the user wants to pay\", \"objective\": \"pay bob for ORD-42\"}"}],"tool_call_id":null,"name":null,"run_id":"run_d3e7a805759e72d9","ts":1796613761.572425}',1.7966137615724248886e+09);
INSERT INTO "messages" VALUES(3,'msg_623b49ea5daf85d7','golden-1','run_d3e7a805759e72d9','tool','desk','{"id":"msg_623b49ea5daf85d7","role":"tool","content":"{\"ok\": true, \"handed_to\": \"cashier\"}","agent":"desk","tool_calls":null,"tool_call_id":"call_7a77d5a050fb5e50","name":"transfer_to_cashier","run_id":"run_d3e7a805759e72d9","ts":1796613761.631312}',1.79661376163131189347e+09);
INSERT INTO "messages" VALUES(4,'msg_6d46a08846fbcd61','golden-1','run_d3e7a805759e72d9','assistant','cashier','{"id":"msg_6d46a08846fbcd61","role":"assistant","content":null,"agent":"cashier","tool_calls":[{"id":"call_4f624ff581b8caf9","name":"lookup","arguments":"{\"order_id\": \"ORD-42\"}"}],"tool_call_id":null,"name":null,"run_id":"run_d3e7a805759e72d9","ts":1796613761.6321602}',1.79661376163216018678e+09);
INSERT INTO "messages" VALUES(5,'msg_aa7e0cd51466ec78','golden-1','run_d3e7a805759e72d9','tool','cashier','{"id":"msg_aa7e0cd51466ec78","role":"tool","content":"{\"order_id\": \"ORD-42\", \"total\": 20000, \"status\": \"unpaid\"}","agent":"cashier","tool_calls":null,"tool_call_id":"call_4f624ff581b8caf9","name":"lookup","run_id":"run_d3e7a805759e72d9","ts":1796613761.6327574}',1.79661376163275742531e+09);
INSERT INTO "messages" VALUES(6,'msg_56a6670663a18475','golden-1','run_d3e7a805759e72d9','assistant','cashier','{"id":"msg_56a6670663a18475","role":"assistant","content":null,"agent":"cashier","tool_calls":[{"id":"call_32d2260296c290f3","name":"pay","arguments":"{\"amount\": 20000, \"to\": \"bob\"}"}],"tool_call_id":null,"name":null,"run_id":"run_d3e7a805759e72d9","ts":1796613761.6332798}',1.79661376163327980042e+09);
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
INSERT INTO "outbox" VALUES('ev_c509239f540d2942','approval_requested','','golden-1','run_d3e7a805759e72d9',1796613761.63488,'{"id":"ev_c509239f540d2942","ts":1796613761.63488,"trace_id":"318cfdcf17426f84b2652f7af8d1c003","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","agent":"cashier","hop":1,"parent_run_id":null,"parent_call_id":null,"type":"approval_requested","card":{"id":"apr_d54e28f53e133dda","session_id":"golden-1","run_id":"run_d3e7a805759e72d9","trace_id":"318cfdcf17426f84b2652f7af8d1c003","agent":"cashier","kind":"tool","tool":"pay","target":null,"call_id":"call_32d2260296c290f3","arguments":{"amount":20000,"to":"bob"},"reason":"tool pay needs a person''s approval","state":{"order_id":"ORD-42"},"requested_at":1796613761.6348698,"timeout_s":86400.0,"required_roles":[],"dual":false,"approvals":[]}}','pending',0,0.0,NULL,0.0,'[]',1.79661376164476466179e+09);
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
INSERT INTO "sessions" VALUES('golden-1',NULL,NULL,NULL,NULL,'{"order_id": "ORD-42"}',1.79661376157198858253e+09,1.79661376157198905949e+09,1,'{}','{"provenance": {"order_id": "user"}}');
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
INSERT INTO "sqlite_sequence" VALUES('messages',6);
INSERT INTO "sqlite_sequence" VALUES('events',11);
COMMIT;
