from emopipe.cli.app import run_and_exit

run_and_exit()
