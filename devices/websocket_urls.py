from django.urls import path

from devices.streaming.consumer import ScreenConsumer

websocket_urlpatterns = [
    path("ws/devices/<int:device_id>/screen/", ScreenConsumer.as_asgi()),
]
