"""Django admin for flywheel. Records a workflow owns (trajectories, steps, votes, verdicts, repairs,
pool entries, runs, exploration output) are shown read-only: edited here they would bypass the workflow's
checks, transaction and events. Queries, apps and function trees stay editable (with their checks).
"""
from django import forms
from django.contrib import admin

from accounts.read_only_admin import ReadOnlyAdmin, ReadOnlyInline
from flywheel import models as m
from flywheel.model_endpoints import ENDPOINT_FIELDS, may_change_endpoint
from flywheel.queries.vocabulary import vocabulary_errors
from flywheel.rules.query_keys import query_key_problem


class QueryAppInline(admin.TabularInline):
    model = m.QueryApp
    extra = 0


class QueryFunctionInline(admin.TabularInline):
    model = m.QueryFunction
    extra = 0
    raw_id_fields = ["function"]


class QueryAdminForm(forms.ModelForm):
    """The admin builds the form's fields (ModelAdmin.get_form); this adds the vocabulary check."""

    def clean_key(self):
        """A new or changed key holds only the safe characters, as at import (rules/query_keys.py)."""
        key = self.cleaned_data.get("key")
        problem = query_key_problem(key) if "key" in self.changed_data else ""
        if problem:
            raise forms.ValidationError(problem)
        return key

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


class StepInline(ReadOnlyInline):
    model = m.Step
    fields = ["index", "foreground_package", "executed_action", "label_masked"]
    show_change_link = True


class VoteInline(ReadOnlyInline):
    model = m.Vote


@admin.register(m.Trajectory)
class TrajectoryAdmin(ReadOnlyAdmin):
    list_display = ["id", "query", "line", "status", "verdict", "destination", "started_at"]
    list_filter = ["line", "status", "stop_kind", "verdict", "destination"]
    raw_id_fields = ["query", "run", "device", "model_version", "annotator"]
    inlines = [StepInline, VoteInline]


@admin.register(m.Step)
class StepAdmin(ReadOnlyAdmin):
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


# Model versions carry their endpoint and sampling settings, which an admin sets here.
@admin.register(m.ModelVersion)
class ModelVersionAdmin(admin.ModelAdmin):
    """Where a version is served changes through its one workflow's rule (flywheel/model_endpoints.py):
    here too, only those it allows may edit those fields."""

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None or may_change_endpoint(request.user) else ENDPOINT_FIELDS

# Owned by their workflows (collection, judging, adjudication, repair, the pools, the loop, exploration,
# calibration, the ledger): shown, never added, changed or deleted here.
for model in (m.GemPage, m.Edge, m.CollectionRun, m.Vote, m.Verdict, m.Adjudication, m.Attribution, m.Repair,
              m.CptEntry, m.SftEntry, m.RlQueryEntry, m.RlRollout, m.EvolutionLoop, m.LoopRound, m.ExplorationRun,
              m.GenerationRun, m.RuleFlag, m.CalibrationRound, m.Tally, m.TallyMark, m.LedgerSnapshot):
    admin.site.register(model, ReadOnlyAdmin)


class SetupRecipeAdminForm(forms.ModelForm):
    class Meta:
        model = m.SetupRecipe
        fields = ["key", "label", "phrases", "account", "apps", "steps"]

    def clean(self):
        from flywheel.queries.recipes import recipe_problems

        cleaned = super().clean()
        row = {name: cleaned.get(name) for name in ("key", "label", "phrases", "account", "apps", "steps")}
        row = {name: value for name, value in row.items() if value is not None}
        problems = recipe_problems(row)
        if problems:
            raise forms.ValidationError(problems)
        return cleaned


@admin.register(m.SetupRecipe)
class SetupRecipeAdmin(admin.ModelAdmin):
    """How prerequisites are met before a task: the phrases, the account a phone must hold, the steps."""
    form = SetupRecipeAdminForm
    list_display = ["key", "label", "account"]
    search_fields = ["key", "label"]
