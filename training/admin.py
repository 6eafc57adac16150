from django.contrib import admin

from training.models import TrainingRun

admin.site.register(TrainingRun)
