"""The backends: what runs a kernel. ``registry`` chooses and opens them; ``worker`` runs any
of them in a killable subprocess; ``gpu`` (with ``gpu_timing``) and ``emulator`` implement the
contract (``autograder/contract.py``); ``compiler`` is NVRTC, which both use.

Importing this package imports nothing: a module that needs only the compiler does not load the
worker machinery.
"""
