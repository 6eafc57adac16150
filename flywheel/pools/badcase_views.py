"""The BadCase upload of the pools page (§2.4.3): a manager brings failed real-user cases to the
RL pool's Phase-1 gate. Bad input answers 400 with every problem and writes nothing."""
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import MANAGER, role_required
from flywheel.pools.badcase import BadCasesInvalid, import_cases, parse_cases
from flywheel.pools.views import pools_context
from flywheel.queries.uploads import ImportTooLarge, form_import_text

MAX_SHOWN = 20  # problems listed on the page; the rest are counted


def _refused(request, problems: list[str]):
    shown = problems[:MAX_SHOWN] + ([f"… and {len(problems) - MAX_SHOWN} more"] if len(problems) > MAX_SHOWN else [])
    return render(request, "flywheel/pools.html", pools_context(badcase_problems=shown), status=400)


@role_required(MANAGER)
@require_POST
def badcase_upload(request):
    try:
        upload = request.FILES.get("file")
        records = parse_cases(form_import_text(request), upload.name if upload else "")
        result = import_cases(records)
    except ImportTooLarge as error:
        return _refused(request, [str(error)])
    except UnicodeDecodeError:
        return _refused(request, ["the file is not UTF-8 text"])
    except BadCasesInvalid as error:
        return _refused(request, error.problems)
    messages.success(request, f"BadCases: {result['created']} new, {result['existing']} already known; "
                              f"{result['measuring']} await the current policy's measurement before the "
                              "Phase-1 gate admits or refuses them.")
    return redirect("pools")
