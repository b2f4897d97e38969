"""`python -m simulator.cli` runs the launchsim command line."""

from . import main

main()
