from sparkdoctor.launch import main

main()
