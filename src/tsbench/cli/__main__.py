from tsbench.cli import main

main()
