from ludwig_hpo.cli import main

main()
