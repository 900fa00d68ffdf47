"""Baton and the Agent2Agent protocol, with the official `a2a-sdk` (`pip install
'baton-relay[a2a]'`): remote agents as hand-off targets and supervisor workers, and a team
served as an A2A agent (`baton a2a serve`). Nothing here imports the SDK until a name is
used."""
