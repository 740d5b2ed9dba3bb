"""The ipywidgets campaign interface: `CampaignApp(camp)` plays a campaign in a
notebook cell; `register_panel(title, factory)` adds or replaces a side panel
(State, Memory, Knowledge...) for apps opened afterwards.

    from widgets import CampaignApp
    CampaignApp(camp)
"""
from .app import CampaignApp
from .live import play_database
from .panels import register_panel

__all__ = ["CampaignApp", "play_database", "register_panel"]
