"""Sovereignty, allocation and tier policies: the distribution's defaults and their evaluation."""
