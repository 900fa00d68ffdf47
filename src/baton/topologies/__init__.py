"""Topologies: compositions of the same kernel."""

from baton.topologies.team import Team

__all__ = ["Team"]
