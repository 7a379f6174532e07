from emopipe.cli.app import run_and_exit

if __name__ == "__main__":  # (not in a worker process --processes spawns: it imports this module by another name)
    run_and_exit()
