"""The τ² retail tools, written from the workload README's prose and the tool schemas.

User, order and product ids are the keys of `db["users"]`, `db["orders"]` and
`db["products"]`. Every write checks the rule the prose states and raises `ActionRefused`
before it changes anything, so a refused call leaves the database as it was.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar, Literal

from baton.bench.tau2.toolkit import (
    GENERIC,
    READ,
    TRANSFER,
    WRITE,
    ActionRefused,
    DomainTools,
    record,
)

CancelReason = Literal["no longer needed", "ordered by mistake"]


class RetailTools(DomainTools):
    """The retail domain's 16 tools over one copy of the retail database."""

    domain: ClassVar[str] = "retail"
    KINDS: ClassVar[dict[str, str]] = {
        "calculate": GENERIC,
        "cancel_pending_order": WRITE,
        "exchange_delivered_order_items": WRITE,
        "find_user_id_by_email": READ,
        "find_user_id_by_name_zip": READ,
        "get_item_details": READ,
        "get_order_details": READ,
        "get_product_details": READ,
        "get_user_details": READ,
        "list_all_product_types": READ,
        "modify_pending_order_address": WRITE,
        "modify_pending_order_items": WRITE,
        "modify_pending_order_payment": WRITE,
        "modify_user_address": WRITE,
        "return_delivered_order_items": WRITE,
        TRANSFER: GENERIC,
    }

    # ------------------------------------------------------------------ lookups
    def _user(self, user_id: str) -> dict[str, Any]:
        return record(self.db["users"], user_id, "User")

    def _order(self, order_id: str) -> dict[str, Any]:
        return record(self.db["orders"], order_id, "Order")

    def _product(self, product_id: str) -> dict[str, Any]:
        return record(self.db["products"], product_id, "Product")

    def _payment_method(self, user_id: str, payment_method_id: str) -> dict[str, Any]:
        return record(self._user(user_id)["payment_methods"], payment_method_id, "Payment method")

    def _gift_card(self, user_id: str, payment_method_id: str) -> dict[str, Any] | None:
        """The user's gift card with this id, or None (other methods, unknown ids)."""
        user = self.db["users"].get(user_id) or {}
        method = user.get("payment_methods", {}).get(payment_method_id)
        return method if method is not None and method.get("source") == "gift_card" else None

    @staticmethod
    def _check_items(order: dict[str, Any], item_ids: list[str]) -> None:
        """item_ids must be a sub-multiset of the order's items (duplicates count); an empty
        list passes, as upstream's tools let it."""
        held = Counter(item["item_id"] for item in order["items"])
        for item_id, wanted in Counter(item_ids).items():
            if held[item_id] < wanted:
                raise ActionRefused(f"{wanted} x item {item_id} not found in the order")

    def _price_difference(
        self,
        order: dict[str, Any],
        item_ids: list[str],
        new_item_ids: list[str],
        *,
        must_differ: bool,
    ) -> tuple[float, list[dict[str, Any]]]:
        """(new total - old total, the new variants in order); each new id must be an available
        variant of the old item's product.

        The difference is the plain float sum of `new price - old price`, item by item, never
        rounded here: `modify_pending_order_items` stores it as it is in the payment entry and
        rounds only the gift card's balance after it changes (as upstream does), and
        `exchange_delivered_order_items` rounds it to cents itself (the prose: "summed and
        rounded"). Rounding it here made 35 retail gold databases differ from upstream's.
        """
        if len(item_ids) != len(new_item_ids):
            raise ActionRefused("The number of items to be exchanged should match")
        diff = 0.0
        variants: list[dict[str, Any]] = []
        for old_id, new_id in zip(item_ids, new_item_ids, strict=True):
            old = next(item for item in order["items"] if item["item_id"] == old_id)
            if must_differ and new_id == old_id:
                raise ActionRefused(f"The new item id should be different from {old_id}")
            variant = self._product(old["product_id"])["variants"].get(new_id)
            if variant is None or not variant.get("available"):
                raise ActionRefused(f"New item {new_id} not found or not available")
            diff += variant["price"] - old["price"]
            variants.append(variant)
        return diff, variants

    # ------------------------------------------------------------------ reads
    def find_user_id_by_email(self, email: str) -> str:
        """Find a user id by email (case-insensitive); fails when no user has it.

        Args:
            email: The user's email, such as 'something@example.com'.
        """
        wanted = email.lower()
        for user_id, user in self.db["users"].items():
            if user["email"].lower() == wanted:
                return str(user_id)
        raise ActionRefused("User not found")

    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        """Find a user id by first name, last name and zip code. Prefer the email lookup.

        Args:
            first_name: The first name of the customer, such as 'John'.
            last_name: The last name of the customer, such as 'Doe'.
            zip: The zip code of the customer, such as '12345'.
        """
        first, last = first_name.lower(), last_name.lower()
        for user_id, user in self.db["users"].items():
            name = user["name"]
            if (
                name["first_name"].lower() == first
                and name["last_name"].lower() == last
                and user["address"]["zip"] == zip
            ):
                return str(user_id)
        raise ActionRefused("User not found")

    def get_user_details(self, user_id: str) -> dict[str, Any]:
        """Get the details of a user, including their orders and payment methods.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
        """
        return self._user(user_id)

    def get_order_details(self, order_id: str) -> dict[str, Any]:
        """Get the status and details of an order.

        Args:
            order_id: The order id, such as '#W0000000' (mind the leading '#').
        """
        return self._order(order_id)

    def get_product_details(self, product_id: str) -> dict[str, Any]:
        """Get the inventory details of a product: its variants, options, prices, availability.

        Args:
            product_id: The product id, such as '6086499569' (not an item id).
        """
        return self._product(product_id)

    def get_item_details(self, item_id: str) -> dict[str, Any]:
        """Get the inventory details of one item (a product variant).

        Args:
            item_id: The item id, such as '6086499569' (not a product id).
        """
        for product in self.db["products"].values():
            if item_id in product["variants"]:
                return record(product["variants"], item_id, "Item")
        raise ActionRefused(f"Item {item_id} not found")

    def list_all_product_types(self) -> dict[str, str]:
        """List the name and product id of all product types (50 in the store)."""
        names = {p["name"]: p["product_id"] for p in self.db["products"].values()}
        return dict(sorted(names.items()))

    # ------------------------------------------------------------------ pending orders
    def cancel_pending_order(self, order_id: str, reason: CancelReason) -> dict[str, Any]:
        """Cancel a pending order and refund its payments (gift cards at once).

        Args:
            order_id: The order id, such as '#W0000000'.
            reason: 'no longer needed' or 'ordered by mistake'.
        """
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ActionRefused("Non-pending order cannot be cancelled")
        if reason not in ("no longer needed", "ordered by mistake"):
            raise ActionRefused("Invalid reason")
        refunds = []
        # every entry is refunded by its amount, refunds of earlier changes included, as
        # upstream's tool does (it does not look at the transaction type)
        for entry in order["payment_history"]:
            method_id, amount = entry["payment_method_id"], entry["amount"]
            refunds.append(
                {"transaction_type": "refund", "amount": amount, "payment_method_id": method_id}
            )
            card = self._gift_card(order["user_id"], method_id)
            if card is not None:
                _credit(card, amount)
        order["payment_history"].extend(refunds)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return order

    def modify_pending_order_address(
        self,
        order_id: str,
        address1: str,
        address2: str,
        city: str,
        state: str,
        country: str,
        zip: str,
    ) -> dict[str, Any]:
        """Change the shipping address of a pending order.

        Args:
            order_id: The order id, such as '#W0000000'.
            address1: The first line of the address, such as '123 Main St'.
            address2: The second line of the address, such as 'Apt 1' or ''.
            city: The city, such as 'San Francisco'.
            state: The state, such as 'CA'.
            country: The country, such as 'USA'.
            zip: The zip code, such as '12345'.
        """
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ActionRefused("Non-pending order cannot be modified")
        order["address"] = _address(address1, address2, city, state, country, zip)
        return order

    def modify_pending_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        """Swap items of a pending order for other variants of the same products (once only).

        Args:
            order_id: The order id, such as '#W0000000'.
            item_ids: The item ids to change, such as ['1008292230']; duplicates allowed.
            new_item_ids: The new item ids, position by position, each of the same product.
            payment_method_id: Pays or receives the price difference, such as
                'gift_card_0000000' or 'credit_card_0000000'.
        """
        order = self._order(order_id)
        # exactly "pending": after one modification the status changes, so it happens once
        if order["status"] != "pending":
            raise ActionRefused("Non-pending order cannot be modified")
        self._check_items(order, item_ids)
        # unrounded, as upstream: the payment entry takes the float sum itself, the gift card's
        # balance is rounded to cents after it changes
        diff, variants = self._price_difference(order, item_ids, new_item_ids, must_differ=True)
        self._payment_method(order["user_id"], payment_method_id)
        card = self._gift_card(order["user_id"], payment_method_id)
        if card is not None and card["balance"] < diff:
            raise ActionRefused("Insufficient gift card balance to pay for the new items")
        kind = "payment" if diff > 0 else "refund"  # a zero difference is logged as a refund
        order["payment_history"].append(
            {"transaction_type": kind, "amount": abs(diff), "payment_method_id": payment_method_id}
        )
        if card is not None:  # the balance is rounded to cents, the payment entry is not
            _credit(card, -diff)
        # Upstream quirks kept for identical end states: every changed item takes the price and
        # options of the last variant processed, not of its own new variant; each old id names
        # the first item that has it now (an item changed earlier in the loop included).
        for old_id, new_id in zip(item_ids, new_item_ids, strict=True):
            last = variants[-1]
            item = next(item for item in order["items"] if item["item_id"] == old_id)
            item["item_id"] = new_id
            item["price"] = last["price"]
            item["options"] = dict(last["options"])
        order["status"] = "pending (item modified)"
        return order

    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> dict[str, Any]:
        """Pay a pending order with another of the user's payment methods.

        Args:
            order_id: The order id, such as '#W0000000'.
            payment_method_id: The new payment method, such as 'gift_card_0000000'.
        """
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ActionRefused("Non-pending order cannot be modified")
        self._payment_method(order["user_id"], payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ActionRefused("There should be exactly one payment for a pending order")
        old_id, amount = history[0]["payment_method_id"], history[0]["amount"]
        if old_id == payment_method_id:
            raise ActionRefused("The new payment method should be different from the current one")
        new_card = self._gift_card(order["user_id"], payment_method_id)
        if new_card is not None and new_card["balance"] < amount:
            raise ActionRefused("Insufficient gift card balance to pay for the order")
        history.append(
            {
                "transaction_type": "payment",
                "amount": amount,
                "payment_method_id": payment_method_id,
            }
        )
        history.append(
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id}
        )
        if new_card is not None:
            _credit(new_card, -amount)
        old_card = self._gift_card(order["user_id"], old_id)
        if old_card is not None:
            _credit(old_card, amount)
        return order

    # ------------------------------------------------------------------ delivered orders
    def exchange_delivered_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        """Request an exchange of delivered items for variants of the same products (once).

        Args:
            order_id: The order id, such as '#W0000000'.
            item_ids: The item ids to exchange, such as ['1008292230']; duplicates allowed.
            new_item_ids: The new item ids, position by position, each of the same product.
            payment_method_id: Pays or receives the price difference, such as
                'gift_card_0000000' or 'credit_card_0000000'.
        """
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ActionRefused("Non-delivered order cannot be exchanged")
        self._check_items(order, item_ids)
        raw, _ = self._price_difference(order, item_ids, new_item_ids, must_differ=False)
        diff = round(raw, 2)  # summed, then rounded to cents before the gift-card check
        self._payment_method(order["user_id"], payment_method_id)
        card = self._gift_card(order["user_id"], payment_method_id)
        if card is not None and card["balance"] < diff:
            raise ActionRefused("Insufficient gift card balance to pay for the price difference")
        # no payment entry yet: the difference is settled when the exchange is processed
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff
        return order

    def return_delivered_order_items(
        self, order_id: str, item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        """Request a return of delivered items; the refund goes to the original method or a
        gift card.

        Args:
            order_id: The order id, such as '#W0000000'.
            item_ids: The item ids to return, such as ['1008292230']; duplicates allowed.
            payment_method_id: Receives the refund: the order's original payment method or one
                of the user's gift cards.
        """
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ActionRefused("Non-delivered order cannot be returned")
        original = order["payment_history"][0]["payment_method_id"]
        if (
            payment_method_id != original
            and self._gift_card(order["user_id"], payment_method_id) is None
        ):
            raise ActionRefused(
                "Payment method should be the original payment method or a gift card"
            )
        self._check_items(order, item_ids)
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return order

    # ------------------------------------------------------------------ account
    def modify_user_address(
        self,
        user_id: str,
        address1: str,
        address2: str,
        city: str,
        state: str,
        country: str,
        zip: str,
    ) -> dict[str, Any]:
        """Change a user's default address.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
            address1: The first line of the address, such as '123 Main St'.
            address2: The second line of the address, such as 'Apt 1' or ''.
            city: The city, such as 'San Francisco'.
            state: The state, such as 'CA'.
            country: The country, such as 'USA'.
            zip: The zip code, such as '12345'.
        """
        user = self._user(user_id)
        user["address"] = _address(address1, address2, city, state, country, zip)
        return user


def _address(
    address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> dict[str, str]:
    """An address in the database's field order."""
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "country": country,
        "state": state,
        "zip": zip,
    }


def _credit(card: dict[str, Any], amount: float) -> None:
    """Add `amount` (negative: a charge) to a gift card's balance, rounded to cents after the
    change, as upstream's tool code rounds it after every change (a cancellation's refund, a
    modification's price difference, a payment moved to or from the card)."""
    card["balance"] = round(card["balance"] + amount, 2)
