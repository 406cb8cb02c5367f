"""Usage ledgers and the federation's monthly report."""
