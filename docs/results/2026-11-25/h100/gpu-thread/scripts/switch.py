"""Run the emopipe command with the pipeline's GIL switch interval replaced: python3 switch.py SECONDS ARGS..."""
import sys

value = float(sys.argv.pop(1))
_set = sys.setswitchinterval
sys.setswitchinterval = lambda v: _set(value if v < 0.004 else v)  # the pipeline's 0.5 ms; its restore of 5 ms kept

from emopipe.cli.app import main  # noqa: E402

raise SystemExit(main())
