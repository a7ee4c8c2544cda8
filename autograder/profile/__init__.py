"""``autograder profile``: a kernel's counted traffic, resources, occupancy and roofline beside
the reference's. Built on grading's ledger and resources; imported by the CLI and delivery.
"""
