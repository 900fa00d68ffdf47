"""`python -m baton ...`: the `baton` command line."""

from baton.cli.app import main

if __name__ == "__main__":
    main()
