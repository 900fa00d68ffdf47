"""The `baton` command line: run a team, show a session's trace, play the demo desk."""
