"""Websockets check roles like pages do: anonymous → close 4401, wrong role → close 4403."""
import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from accounts.roles import ROLES, has_role

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class RoleWebsocketConsumer(AsyncWebsocketConsumer):
    """Accepts only signed-in people with one of `required_roles`; sends JSON and binary frames."""

    required_roles = ROLES

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(has_role)(user, *self.required_roles):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.accept()
        await self.on_accepted()

    async def on_accepted(self):
        """Subclasses join their groups here."""

    async def send_json(self, content):
        await self.send(text_data=json.dumps(content))
