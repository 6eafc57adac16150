"""Live updates for the manager dashboard over the Redis channel layer (events.py sends them)."""
from accounts.consumers import RoleWebsocketConsumer
from accounts.roles import MANAGER
from flywheel.events import DASHBOARD_GROUP


class DashboardConsumer(RoleWebsocketConsumer):
    required_roles = (MANAGER,)

    async def on_accepted(self):
        await self.channel_layer.group_add(DASHBOARD_GROUP, self.channel_name)
        await self.send_json({"type": "hello", "group": DASHBOARD_GROUP})

    async def disconnect(self, code):
        await self.channel_layer.group_discard(DASHBOARD_GROUP, self.channel_name)

    async def dashboard_event(self, message):
        await self.send_json({"type": "event", "event": message["event"]})
