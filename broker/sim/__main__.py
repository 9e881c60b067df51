import sys

from broker.sim.runner import main

sys.exit(main())
