# Installed by `make` into the virtual environment (.venv/etc/ipython/), where IPython reads it.
# The book build and the tests start one kernel per chapter on 127.0.0.1, each with its own
# signing key; the kernel's warning about unencrypted TCP (meant for kernels reachable over a
# network) would otherwise be printed once per chapter. Errors are still shown.
c = get_config()  # noqa: F821
c.IPKernelApp.log_level = "ERROR"
