"""Sovereignty, allocation and tier policies: the distribution's defaults merged with the site's, and their evaluation.

May import engine, site and the foundation.
"""
