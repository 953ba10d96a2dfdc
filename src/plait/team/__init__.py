"""Teams: a coordinator with members as tools, or a swarm of peers handing off."""

from plait.team.inherit import History, Inherit, InheritPolicy
from plait.team.team import Team

__all__ = ["History", "Inherit", "InheritPolicy", "Team"]
