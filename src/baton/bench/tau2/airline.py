"""The τ² airline tools, written from the workload README's prose and the tool schemas.

Flights, users and reservations are the keys of `db["flights"]`, `db["users"]` and
`db["reservations"]`. The clock is fixed (`NOW`), so bookings are reproducible. The tools
enforce only what the prose says the API enforces; the rest of the airline policy (who may
cancel, basic-economy changes, ...) is the agent's job, as upstream.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

# pydantic reads TypedDicts from typing_extensions on Python < 3.12
from typing_extensions import TypedDict

from baton.bench.tau2.toolkit import (
    GENERIC,
    READ,
    TRANSFER,
    WRITE,
    ActionRefused,
    DomainTools,
    record,
)

NOW = "2024-05-15T15:00:00"
"""The airline's fixed "now" (EST): `created_at` of new reservations."""

NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
"""Ids given to new reservations: the first one not yet taken."""

CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
"""Ids given to new travel certificates: the first one the user does not hold."""

AIRPORTS = {
    "SFO": "San Francisco",
    "JFK": "New York",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "DFW": "Dallas",
    "DEN": "Denver",
    "SEA": "Seattle",
    "ATL": "Atlanta",
    "MIA": "Miami",
    "BOS": "Boston",
    "PHX": "Phoenix",
    "IAH": "Houston",
    "LAS": "Las Vegas",
    "MCO": "Orlando",
    "EWR": "Newark",
    "CLT": "Charlotte",
    "MSP": "Minneapolis",
    "DTW": "Detroit",
    "PHL": "Philadelphia",
    "LGA": "LaGuardia",
}
"""The 20 airports the airline serves (IATA code -> city), in upstream's order and words."""

Cabin = Literal["basic_economy", "economy", "business"]


class FlightRef(TypedDict):
    """One flight of a reservation: number and date."""

    flight_number: str
    date: str


class Passenger(TypedDict):
    """A passenger: name and date of birth (YYYY-MM-DD)."""

    first_name: str
    last_name: str
    dob: str


class PaymentRef(TypedDict):
    """A payment of a booking: a payment method of the user's profile and an amount."""

    payment_id: str
    amount: int
    """Whole units, as upstream's `Payment.amount` (348.0 is read as 348; 348.5 is refused)."""


class AirlineTools(DomainTools):
    """The airline domain's 14 tools over one copy of the airline database."""

    domain: ClassVar[str] = "airline"
    KINDS: ClassVar[dict[str, str]] = {
        "book_reservation": WRITE,
        "calculate": GENERIC,
        "cancel_reservation": WRITE,
        "get_flight_status": READ,
        "get_reservation_details": READ,
        "get_user_details": READ,
        "list_all_airports": READ,
        "search_direct_flight": READ,
        "search_onestop_flight": READ,
        "send_certificate": WRITE,
        TRANSFER: GENERIC,
        "update_reservation_baggages": WRITE,
        "update_reservation_flights": WRITE,
        "update_reservation_passengers": WRITE,
    }

    # ------------------------------------------------------------------ lookups
    def _user(self, user_id: str) -> dict[str, Any]:
        return record(self.db["users"], user_id, "User")

    def _reservation(self, reservation_id: str) -> dict[str, Any]:
        return record(self.db["reservations"], reservation_id, "Reservation")

    def _flight(self, flight_number: str) -> dict[str, Any]:
        return record(self.db["flights"], flight_number, "Flight")

    def _bookable(self, flight_number: str, date: str, cabin: str, seats: int) -> dict[str, Any]:
        """A new segment {origin, destination, flight_number, date, price} at today's price;
        the flight must be `available` that day with `seats` free seats in `cabin`."""
        flight = self._flight(flight_number)
        day = flight["dates"].get(date)
        if day is None or day["status"] != "available":
            raise ActionRefused(f"Flight {flight_number} not available on date {date}")
        if day["available_seats"][cabin] < seats:
            raise ActionRefused(f"Not enough seats on flight {flight_number}")
        return {
            "origin": flight["origin"],
            "destination": flight["destination"],
            "flight_number": flight_number,
            "date": date,
            "price": day["prices"][cabin],
        }

    def _charge(self, user: dict[str, Any], payment_id: str, total: float) -> dict[str, Any]:
        """Check a change's payment method: in the profile, no certificate, and a gift card
        must cover the total. Returns the method; nothing is changed yet."""
        method = record(user["payment_methods"], payment_id, "Payment method")
        if method["source"] == "certificate":
            raise ActionRefused("Certificate cannot be used to update reservation")
        if method["source"] == "gift_card" and method["amount"] < total:
            raise ActionRefused("Gift card balance is not enough")
        return method

    @staticmethod
    def _settle(
        reservation: dict[str, Any], method: dict[str, Any], payment_id: str, total: float
    ) -> None:
        """Charge (or, when negative, credit) a checked method and log a non-zero total."""
        if method["source"] == "gift_card":
            method["amount"] -= total
        if total != 0:
            reservation["payment_history"].append({"payment_id": payment_id, "amount": total})

    @staticmethod
    def _offer(flight: dict[str, Any], date: str, day: dict[str, Any]) -> dict[str, Any]:
        return {
            "flight_number": flight["flight_number"],
            "origin": flight["origin"],
            "destination": flight["destination"],
            "status": day["status"],
            "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
            "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
            "date": date,
            "available_seats": day["available_seats"],
            "prices": day["prices"],
        }

    def _available(self, origin: str, destination: str | None, date: str) -> list[dict[str, Any]]:
        """Offers of flights from `origin` (to `destination`, if given) available on `date`."""
        offers = []
        for flight in self.db["flights"].values():
            if flight["origin"] != origin:
                continue
            if destination is not None and flight["destination"] != destination:
                continue
            day = flight["dates"].get(date)
            if day is not None and day["status"] == "available":
                offers.append(self._offer(flight, date, day))
        return offers

    # ------------------------------------------------------------------ reads
    def get_user_details(self, user_id: str) -> dict[str, Any]:
        """Get the details of a user: profile, payment methods, membership and reservations.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
        """
        return self._user(user_id)

    def get_reservation_details(self, reservation_id: str) -> dict[str, Any]:
        """Get the details of a reservation.

        Args:
            reservation_id: The reservation id, such as '8JX2WO'.
        """
        return self._reservation(reservation_id)

    def list_all_airports(self) -> list[dict[str, str]]:
        """List all airports the airline serves: IATA code and city."""
        return [{"iata": code, "city": city} for code, city in AIRPORTS.items()]

    def get_flight_status(self, flight_number: str, date: str) -> str:
        """Get the status of a flight on a date (available, on time, delayed, flying, ...).

        Args:
            flight_number: The flight number, such as 'HAT001'.
            date: The date of the flight, such as '2024-05-01'.
        """
        day = self._flight(flight_number)["dates"].get(date)
        if day is None:
            raise ActionRefused(f"Flight {flight_number} not found on date {date}")
        return str(day["status"])

    def search_direct_flight(
        self, origin: str, destination: str, date: str
    ) -> list[dict[str, Any]]:
        """Search direct flights between two airports on a date: seats and prices per cabin.

        Args:
            origin: The origin airport, three letters, such as 'JFK'.
            destination: The destination airport, three letters, such as 'LAX'.
            date: The date in the format 'YYYY-MM-DD', such as '2024-05-01'.
        """
        return self._available(origin, destination, date)

    def search_onestop_flight(
        self, origin: str, destination: str, date: str
    ) -> list[list[dict[str, Any]]]:
        """Search one-stop connections between two airports departing on a date.

        Args:
            origin: The origin airport, three letters, such as 'JFK'.
            destination: The destination airport, three letters, such as 'LAX'.
            date: The date of the first flight, 'YYYY-MM-DD', such as '2024-05-01'.
        """
        # upstream's next day, kept for identical results: May 2024 only, the day not padded
        # ("2024-05-2" finds no flight), so an overnight first leg before the 9th connects to none
        next_day = f"2024-05-{int(date[-2:]) + 1}"
        pairs = []
        for first in self._available(origin, None, date):
            arrival = first["scheduled_arrival_time_est"]
            # the second leg flies the same day, or the next one when the first lands "+1"
            second_date = next_day if arrival.endswith("+1") else date
            for second in self._available(first["destination"], destination, second_date):
                # string comparison of the scheduled times, as the prose specifies
                if second["scheduled_departure_time_est"] >= arrival:
                    pairs.append([first, second])
        return pairs

    # ------------------------------------------------------------------ writes
    def book_reservation(
        self,
        user_id: str,
        origin: str,
        destination: str,
        flight_type: Literal["one_way", "round_trip"],
        cabin: Cabin,
        flights: list[FlightRef],
        passengers: list[Passenger],
        payment_methods: list[PaymentRef],
        total_baggages: int,
        nonfree_baggages: int,
        insurance: Literal["yes", "no"],
    ) -> dict[str, Any]:
        """Book a reservation; the payments must add up exactly to the price.

        Args:
            user_id: The id of the booking user, such as 'sara_doe_496'.
            origin: The origin airport (IATA), such as 'SFO'.
            destination: The destination airport (IATA), such as 'JFK'.
            flight_type: 'one_way' or 'round_trip'.
            cabin: 'basic_economy', 'economy' or 'business' (the same for every flight).
            flights: Every flight of the trip: flight_number and date (YYYY-MM-DD).
            passengers: Every passenger: first_name, last_name, dob (YYYY-MM-DD).
            payment_methods: Payment ids from the user's profile with the amount each pays.
            total_baggages: The total number of checked bags.
            nonfree_baggages: How many of them are paid (50 each).
            insurance: 'yes' or 'no' (30 per passenger).
        """
        user = self._user(user_id)
        reservation_id = next(
            (i for i in NEW_RESERVATION_IDS if i not in self.db["reservations"]), None
        )
        if reservation_id is None:
            raise ActionRefused("No reservation id left for a new booking")
        count = len(passengers)
        segments = [self._bookable(f["flight_number"], f["date"], cabin, count) for f in flights]
        # in the prose's order ("prices[cabin] x passengers per flight, + 30 x passengers if
        # insured, + 50 x nonfree_baggages"), which decides the float sum if prices are floats
        total: float = 0
        for segment in segments:
            total += segment["price"] * count
        if insurance == "yes":
            total += 30 * count
        total += 50 * nonfree_baggages
        methods = user["payment_methods"]
        for pay in payment_methods:
            method = methods.get(pay["payment_id"])
            if method is None:
                raise ActionRefused(f"Payment method {pay['payment_id']} not found")
            if (
                method["source"] in ("gift_card", "certificate")
                and method["amount"] < pay["amount"]
            ):
                raise ActionRefused(f"Not enough balance in payment method {pay['payment_id']}")
        paid = sum(pay["amount"] for pay in payment_methods)
        if paid != total:
            raise ActionRefused(
                f"Payment amount does not add up, total price is {total}, but paid {paid}"
            )
        for pay in payment_methods:
            method = methods[pay["payment_id"]]
            if method["source"] == "gift_card":
                method["amount"] -= pay["amount"]
            elif method["source"] == "certificate":
                del methods[pay["payment_id"]]  # a certificate is used up, remainder and all
        for f in flights:
            self.db["flights"][f["flight_number"]]["dates"][f["date"]]["available_seats"][
                cabin
            ] -= count
        reservation = {
            "reservation_id": reservation_id,
            "user_id": user_id,
            "origin": origin,
            "destination": destination,
            "flight_type": flight_type,
            "cabin": cabin,
            "flights": segments,
            "passengers": [dict(p) for p in passengers],
            "payment_history": [
                {"payment_id": p["payment_id"], "amount": p["amount"]} for p in payment_methods
            ],
            "created_at": NOW,
            "total_baggages": total_baggages,
            "nonfree_baggages": nonfree_baggages,
            "insurance": insurance,
        }
        self.db["reservations"][reservation_id] = reservation
        user["reservations"].append(reservation_id)
        return reservation

    def cancel_reservation(self, reservation_id: str) -> dict[str, Any]:
        """Cancel a whole reservation: every payment is refunded to its method.

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
        """
        res = self._reservation(reservation_id)
        # seats are not released and the policy is not checked here (as upstream)
        refunds = [
            {"payment_id": p["payment_id"], "amount": -p["amount"]} for p in res["payment_history"]
        ]
        res["payment_history"].extend(refunds)
        res["status"] = "cancelled"
        return res

    def update_reservation_flights(
        self, reservation_id: str, cabin: Cabin, flights: list[FlightRef], payment_id: str
    ) -> dict[str, Any]:
        """Change the flights and/or cabin of a reservation; pays or refunds the difference.

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
            cabin: The cabin for every flight: 'basic_economy', 'economy' or 'business'.
            flights: Every flight of the ENTIRE new reservation, unchanged ones included.
            payment_id: A gift card or credit card of the user's profile, such as
                'credit_card_7815826'.
        """
        res = self._reservation(reservation_id)
        user = self._user(res["user_id"])
        count = len(res["passengers"])
        segments = []
        for f in flights:
            kept = next(
                (
                    s
                    for s in res["flights"]
                    if s["flight_number"] == f["flight_number"] and s["date"] == f["date"]
                ),
                None,
            )
            if kept is not None and cabin == res["cabin"]:
                segments.append(kept)  # an unchanged segment keeps the price paid
            else:
                segments.append(self._bookable(f["flight_number"], f["date"], cabin, count))
        total = (
            sum(s["price"] for s in segments) - sum(s["price"] for s in res["flights"])
        ) * count
        method = self._charge(user, payment_id, total)
        self._settle(res, method, payment_id, total)
        res["flights"] = segments
        res["cabin"] = cabin
        return res

    def update_reservation_baggages(
        self, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
    ) -> dict[str, Any]:
        """Change the checked bags of a reservation; added paid bags cost 50 each.

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
            total_baggages: The new total number of checked bags.
            nonfree_baggages: The new number of paid bags.
            payment_id: A gift card or credit card of the user's profile, such as
                'credit_card_7815826'.
        """
        res = self._reservation(reservation_id)
        user = self._user(res["user_id"])
        total = 50 * max(0, nonfree_baggages - res["nonfree_baggages"])
        method = self._charge(user, payment_id, total)
        self._settle(res, method, payment_id, total)
        res["total_baggages"] = total_baggages
        res["nonfree_baggages"] = nonfree_baggages
        return res

    def update_reservation_passengers(
        self, reservation_id: str, passengers: list[Passenger]
    ) -> dict[str, Any]:
        """Replace the passengers of a reservation (their number cannot change).

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
            passengers: Every passenger: first_name, last_name, dob (YYYY-MM-DD).
        """
        res = self._reservation(reservation_id)
        if len(passengers) != len(res["passengers"]):
            raise ActionRefused("Number of passengers does not match")
        res["passengers"] = [dict(p) for p in passengers]
        return res

    def send_certificate(self, user_id: str, amount: float) -> str:
        """Send a travel certificate (a gesture of goodwill) to a user. Be careful!

        Args:
            user_id: The user id, such as 'sara_doe_496'.
            amount: The certificate amount.
        """
        methods = self._user(user_id)["payment_methods"]
        for certificate_id in CERTIFICATE_IDS:
            if certificate_id not in methods:
                methods[certificate_id] = {
                    "source": "certificate",
                    "id": certificate_id,
                    "amount": float(amount),
                }
                return f"Certificate {certificate_id} added to user {user_id} with amount {amount}."
        raise ActionRefused("Too many certificates")
