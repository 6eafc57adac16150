"""Every app's websocket routes, for the ASGI router."""
from devices.websocket_urls import websocket_urlpatterns as device_websockets
from flywheel.websocket_urls import websocket_urlpatterns as flywheel_websockets

websocket_urlpatterns = [*flywheel_websockets, *device_websockets]
