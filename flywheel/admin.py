from django import forms
from django.contrib import admin

from flywheel import models as m
from flywheel.queries.vocabulary import vocabulary_errors


class QueryAppInline(admin.TabularInline):
    model = m.QueryApp
    extra = 0


class QueryFunctionInline(admin.TabularInline):
    model = m.QueryFunction
    extra = 0
    raw_id_fields = ["function"]


class QueryAdminForm(forms.ModelForm):
    """The admin builds the form's fields (ModelAdmin.get_form); this adds the vocabulary check."""

    def clean(self):
        """Subclass, persona and capabilities come from the fixed vocabularies, as at import."""
        cleaned = super().clean()
        capabilities = cleaned.get("capabilities") or []
        if not isinstance(capabilities, list):
            raise forms.ValidationError("Capabilities must be a list of capability names.")
        errors = vocabulary_errors(cleaned.get("tier", ""), cleaned.get("subclass", ""),
                                   cleaned.get("persona", ""), capabilities)
        if errors:
            raise forms.ValidationError(errors)
        return cleaned


@admin.register(m.Query)
class QueryAdmin(admin.ModelAdmin):
    form = QueryAdminForm
    list_display = ["key", "tier", "source", "risk", "status", "assignee"]
    list_filter = ["tier", "source", "risk", "status"]
    search_fields = ["key", "text"]
    inlines = [QueryAppInline, QueryFunctionInline]


class StepInline(admin.TabularInline):
    model = m.Step
    extra = 0
    fields = ["index", "foreground_package", "executed_action", "label_masked"]
    readonly_fields = fields
    show_change_link = True


class VoteInline(admin.TabularInline):
    model = m.Vote
    extra = 0


@admin.register(m.Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = ["id", "query", "line", "status", "verdict", "destination", "started_at"]
    list_filter = ["line", "status", "stop_kind", "verdict", "destination"]
    raw_id_fields = ["query", "run", "device", "model_version", "annotator"]
    inlines = [StepInline, VoteInline]


@admin.register(m.Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ["trajectory", "index", "foreground_package", "label_masked"]
    raw_id_fields = ["trajectory"]


@admin.register(m.App)
class AppAdmin(admin.ModelAdmin):
    list_display = ["package", "label", "category", "is_system"]
    list_filter = ["category", "is_system"]


@admin.register(m.FunctionNode)
class FunctionNodeAdmin(admin.ModelAdmin):
    list_display = ["app", "path", "is_leaf", "status"]
    list_filter = ["status", "is_leaf", "app"]
    raw_id_fields = ["parent", "reuse_of"]


for model in (m.GemPage, m.Edge, m.ModelVersion, m.CollectionRun, m.Vote, m.Verdict,
              m.Adjudication, m.Attribution, m.Repair, m.CptEntry, m.SftEntry, m.RlQueryEntry,
              m.RlRollout):
    admin.site.register(model)
