from sparkdoctor.cli import main

main()
