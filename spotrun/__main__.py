"""`python -m spotrun`: the CLI; `python -m spotrun agent ...` skips the CLI's imports."""

import sys

if len(sys.argv) > 1 and sys.argv[1] == "agent":
    from spotrun.agent.main import main as agent_main

    sys.exit(agent_main(sys.argv[2:]))
else:
    from spotrun.cli.entry import main

    main()
