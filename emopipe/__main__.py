from emopipe.cli.main import main

raise SystemExit(main())
