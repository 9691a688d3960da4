from compare.cli import main

main()
