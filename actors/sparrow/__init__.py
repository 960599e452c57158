"""Sparrow (2013 paper): distributed schedulers that batch-sample with late binding, and node monitors.
``plugin`` declares it."""
