"""Live updates for the manager dashboard over the Redis channel layer."""
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from accounts.consumers import RoleWebsocketConsumer
from accounts.roles import MANAGER

DASHBOARD_GROUP = "dashboard"


class DashboardConsumer(RoleWebsocketConsumer):
    required_roles = (MANAGER,)

    async def on_accepted(self):
        await self.channel_layer.group_add(DASHBOARD_GROUP, self.channel_name)
        await self.send_json({"type": "hello", "group": DASHBOARD_GROUP})

    async def disconnect(self, code):
        await self.channel_layer.group_discard(DASHBOARD_GROUP, self.channel_name)

    async def dashboard_event(self, message):
        await self.send_json({"type": "event", "event": message["event"]})


def notify_dashboard(event: dict):
    """Tell every open dashboard that something changed (a run finished, a pool grew...)."""
    async_to_sync(get_channel_layer().group_send)(
        DASHBOARD_GROUP, {"type": "dashboard.event", "event": event})
