from django.contrib import admin

from .models import TrainingRun

admin.site.register(TrainingRun)
