"""The placement solver: CP-SAT model, LP relaxation bound, first-fit start, node-class aggregation, packing.

Knows nothing of YAML or the site repo: plain types (`placement_types`) in, assignments out. May
import the foundation only.
"""
