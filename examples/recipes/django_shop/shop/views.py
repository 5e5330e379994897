from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from shop.orders import place_order


@require_POST
def create_order(request: HttpRequest) -> JsonResponse:
    order = place_order(request.POST["customer"])
    return JsonResponse({"order": order.pk}, status=201)
