"""The billing REST API: the organization's balance and pay as you go, its ledger, coupons.

Billing belongs to the organization. A project key acts as a member: it reads the balance and
the ledger and redeems coupons, but pay as you go is an owner's choice, so a key's PATCH is 403.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin, ListAPIView, get_paginated_response
from belvedir.schema import errors
from billing import selectors, services
from billing.models import LedgerEntry


class BillingSerializer(serializers.Serializer):
    organization = serializers.CharField(help_text="The organization's id.")
    balance_micros = serializers.IntegerField(help_text="The balance in micro-dollars.")
    pay_as_you_go = serializers.BooleanField()
    monthly_limit_micros = serializers.IntegerField(
        help_text="With pay as you go: the most runs may cost in a calendar month."
    )
    month_run_spend_micros = serializers.IntegerField(
        help_text="What runs cost this calendar month, net of refunds."
    )
    run_price_cpu_micros = serializers.IntegerField(help_text="0: CPU runs are not billed.")
    run_price_gpu_micros = serializers.IntegerField(help_text="0: GPU runs are not billed.")


class BillingUpdateSerializer(serializers.Serializer):
    pay_as_you_go = serializers.BooleanField(required=False)
    monthly_limit_micros = serializers.IntegerField(
        required=False, min_value=0, max_value=services.MAX_AMOUNT_MICROS
    )


class LedgerEntrySerializer(serializers.ModelSerializer):
    created_by = serializers.SerializerMethodField()

    class Meta:
        model = LedgerEntry
        fields = ["id", "kind", "amount_micros", "reference", "created_by", "created_at"]

    def get_created_by(self, entry: LedgerEntry) -> str:
        """A member's email; "Belvedir" for an operator's entry; "" for the system's."""
        return selectors.entry_author(entry)


class CouponRedeemSerializer(serializers.Serializer):
    code = serializers.CharField(max_length=64)


class CouponRedeemedSerializer(serializers.Serializer):
    entry = LedgerEntrySerializer()
    balance_micros = serializers.IntegerField()


def billing_body(organization) -> dict:
    account = selectors.account_for(organization=organization)
    return {
        "organization": organization.pk,
        "balance_micros": selectors.balance(organization=organization),
        "pay_as_you_go": account.pay_as_you_go,
        "monthly_limit_micros": account.monthly_limit_micros,
        "month_run_spend_micros": selectors.month_run_spend(organization=organization),
        "run_price_cpu_micros": selectors.run_price(gpu=False),
        "run_price_gpu_micros": selectors.run_price(gpu=True),
    }


class BillingView(AccessMixin, APIView):
    @extend_schema(
        operation_id="billing_read",
        summary="The organization's balance, pay as you go and run prices.",
        responses={200: BillingSerializer, **errors(401, 404)},
    )
    def get(self, request):
        return Response(billing_body(self.access.organization))

    @extend_schema(
        operation_id="billing_update",
        summary="Turn pay as you go on or off, or change its monthly limit (owners only).",
        request=BillingUpdateSerializer,
        responses={200: BillingSerializer, **errors(400, 401, 403, 404)},
    )
    def patch(self, request):
        self.access.require_owner()
        data = BillingUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.account_update(
            organization=self.access.organization,
            pay_as_you_go=data.validated_data.get("pay_as_you_go"),
            monthly_limit_micros=data.validated_data.get("monthly_limit_micros"),
            by=request.user,
        )
        return Response(billing_body(self.access.organization))


class LedgerView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="billing_ledger",
        summary="The organization's ledger: credits, charges, refunds, coupons, newest first.",
        responses={200: LedgerEntrySerializer(many=True), **errors(401, 404)},
    )
    def get(self, request):
        entries = selectors.ledger_for(organization=self.access.organization)
        return get_paginated_response(
            view=self, queryset=entries, serializer_class=LedgerEntrySerializer
        )


class CouponRedeemView(AccessMixin, APIView):
    @extend_schema(
        operation_id="billing_coupon_redeem",
        summary="Redeem a coupon code: its amount is added to the balance, once per organization.",
        request=CouponRedeemSerializer,
        responses={201: CouponRedeemedSerializer, **errors(400, 401, 403, 404)},
    )
    def post(self, request):
        self.access.require_write()
        data = CouponRedeemSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        organization = self.access.organization
        entry = services.coupon_redeem(
            organization=organization, code=data.validated_data["code"], created_by=request.user
        )
        body = {
            "entry": LedgerEntrySerializer(entry).data,
            "balance_micros": selectors.balance(organization=organization),
        }
        return Response(body, status=status.HTTP_201_CREATED)
