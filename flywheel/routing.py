from django.urls import path

from devices.routing import websocket_urlpatterns as device_websocket_urlpatterns

from .consumers import DashboardConsumer

websocket_urlpatterns = [
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
    *device_websocket_urlpatterns,
]
