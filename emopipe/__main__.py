from emopipe.cli.app import main

raise SystemExit(main())
