"""The reference reports of the bundled benchmark's report questions, one writer per question (`derive:
{report: NAME}` in questions.yaml): the figures come from the question's SQL result, the words from here."""

from __future__ import annotations

from collections.abc import Callable

from .gold import SECTIONS_CRITERION, ReportParts, Result, dimensions, listing, md_table, pct, usd


def render_region_report(result: Result) -> ReportParts:
    rows = result.records()
    met = [r["region"] for r in rows if r["gap"] >= 0]
    missed = [r["region"] for r in rows if r["gap"] < 0]
    total, plan = sum(r["net_revenue"] for r in rows), sum(r["target"] for r in rows)
    top, bottom = rows[0], rows[-1]
    surplus = max(rows, key=lambda r: r["gap"])
    shortfall = min(rows, key=lambda r: r["gap"])
    figures = "; ".join(f"{r['region']} {usd(r['net_revenue'])}" for r in rows)
    targets = "; ".join(f"{r['region']} {usd(r['target'])}" for r in rows)
    formats = {"net_revenue": usd, "target": usd, "attainment_pct": pct, "gap": usd}
    return ReportParts(
        summary=f"In FY2020 (1 July 2019 to 30 June 2020) the four regions booked {usd(total)} of net revenue "
        f"against a combined plan of {usd(plan)} ({pct(100 * total / plan)} attainment). {listing(met)} met "
        f"their targets; {listing(missed)} missed. {top['region']} led on attainment at {pct(top['attainment_pct'])}, "
        f"{bottom['region']} trailed at {pct(bottom['attainment_pct'])}.",
        analysis=md_table(result, formats)
        + f"\n\nThe largest dollar surplus was {surplus['region']} ({usd(surplus['gap'])}), the largest shortfall "
        f"{shortfall['region']} ({usd(shortfall['gap'])}).",
        context="The annual plan sets FY2020 net revenue targets per region and attributes each order to the "
        "region of the store that took it (store state → Regions), not to the sales team's home region. Net "
        "revenue is unit price × order quantity × (1 − discount); prices are stored as text with thousands "
        "separators and must be converted before summing. FY2020 runs from 1 July 2019 to 30 June 2020.",
        connections=f"Attainment and dollar gap rank the regions differently: {top['region']} has the highest "
        f"attainment while {surplus['region']} contributes the most surplus dollars because its target is larger. "
        f"The shortfalls of {listing(missed)} add up to {usd(-sum(r['gap'] for r in rows if r['gap'] < 0))}.",
        conclusions=f"FY2020 plan attainment was mixed: {listing(met)} exceeded plan, {listing(missed)} fell short. "
        f"Recovery plans should focus on {shortfall['region']}, the largest gap in dollars.",
        criteria=dimensions(
            sql=[
                f"Reports FY2020 net revenue per region: {figures}",
                "Attributes orders to the store's region (Store Locations → Regions), not the Sales Team region",
            ],
            external=[
                f"Uses the FY2020 targets of the annual plan: {targets}",
                "Defines FY2020 as 1 July 2019 to 30 June 2020",
            ],
            logic=[
                f"Identifies {listing(met)} as meeting plan and {listing(missed)} as missing it",
                f"Ranks {top['region']} first on attainment ({pct(top['attainment_pct'])})",
                f"Notes {surplus['region']} has the largest dollar surplus ({usd(surplus['gap'])})",
            ],
            complete=["Gives net revenue, target, attainment and gap for all four regions", SECTIONS_CRITERION],
        ),
        chain=[
            "fiscal_calendar.md: FY2020 date range → filter orders by OrderDate",
            "regional_targets.md: order region = store's region → join Store Locations and Regions",
            "metric_definitions.md: net revenue formula → aggregate per region",
            "regional_targets.md: FY2020 targets → attainment and gap",
        ],
    )


def render_discount_report(result: Result) -> ReportParts:
    rows = result.records()
    orders = sum(r["orders"] for r in rows)
    deep = sum(r["deep_discount_orders"] for r in rows)
    violations = sum(r["cap_violations"] for r in rows)
    leakage = sum(r["violation_discount_usd"] for r in rows)
    worst = rows[0]
    clean = [r["sales_channel"] for r in rows if r["cap_violations"] == 0]
    above = [r["sales_channel"] for r in rows if r["deep_discount_pct"] > 8.0]
    per_channel = "; ".join(f"{r['sales_channel']} {r['cap_violations']}" for r in rows)
    formats = {"deep_discount_pct": pct, "violation_discount_usd": usd}
    return ReportParts(
        summary=f"Of {orders} FY2020 orders, {deep} ({pct(100 * deep / orders)}) carried a deep discount and "
        f"{violations} broke their channel's discount cap, giving away {usd(leakage)} of discount beyond policy. "
        f"{worst['sales_channel']} accounts for most violations ({worst['cap_violations']}); "
        f"{listing(clean)} had none.",
        analysis=md_table(result, formats)
        + f"\n\nCap violations by channel: {per_channel}. Channels above the 8.00 % deep-discount ceiling: "
        f"{listing(above) if above else 'none'}.",
        context="The discount policy defines a deep discount as 0.30 or more (regional-director approval "
        "required) and caps discounts per channel: In-Store 0.40, Distributor 0.30, Online 0.20, Wholesale 0.20. "
        "An order is a cap violation when its discount is strictly above its channel's cap, even if approved. "
        "The Pricing Committee wants the deep-discount share at or below 8.00 % per fiscal year.",
        connections="Because the Online and Wholesale caps sit below the deep tier, every deep discount on those "
        "channels is also a cap violation, while Distributor violates only at 0.40 and In-Store cannot violate. "
        "Approval of a deep discount therefore does not make it compliant on the low-cap channels.",
        conclusions=f"Enforce the caps in the order system for {worst['sales_channel']} first; the "
        f"{usd(leakage)} of discount above caps is the measurable leakage. Deep-discount share of "
        f"{pct(100 * deep / orders)} is {'above' if deep / orders > 0.08 else 'within'} the 8.00 % ceiling.",
        criteria=dimensions(
            sql=[
                f"Reports FY2020 cap violations per channel: {per_channel}",
                f"Reports {deep} deep-discount orders out of {orders} and {usd(leakage)} of discount on violations",
            ],
            external=[
                "Applies the channel caps In-Store 0.40, Distributor 0.30, Online 0.20, Wholesale 0.20",
                "Uses deep discount = 0.30 or more and the 8.00 % deep-discount ceiling",
            ],
            logic=[
                "Explains that on Online and Wholesale every deep discount is a cap violation",
                f"Identifies {worst['sales_channel']} as the channel with most violations and "
                f"{listing(clean)} as compliant",
            ],
            complete=[
                "Covers all four channels with orders, deep discounts, violations and discount amount",
                SECTIONS_CRITERION,
            ],
        ),
        chain=[
            "fiscal_calendar.md: FY2020 date range → filter orders",
            "discount_policy.md: channel caps and deep tier → per-order flags",
            "metric_definitions.md: discount amount = gross − net revenue → leakage",
        ],
    )


def render_fulfillment_report(result: Result) -> ReportParts:
    rows = result.records()
    below = [r for r in rows if r["delivery_sla_pct"] < 80]
    best = rows[-1]
    worst_ship = min(rows, key=lambda r: r["ship_sla_pct"])
    figures = "; ".join(f"{r['distribution_center']} {pct(r['delivery_sla_pct'])}" for r in rows)
    formats = {"delivery_sla_pct": pct, "ship_sla_pct": pct}
    return ReportParts(
        summary=f"In FY2020, {len(below)} of {len(rows)} distribution centers missed the 80 % delivery SLA "
        f"compliance target: {listing([r['distribution_center'] for r in below])}. {best['distribution_center']} "
        f"was best at {pct(best['delivery_sla_pct'])}. Ship-SLA compliance was weakest at "
        f"{worst_ship['distribution_center']} ({pct(worst_ship['ship_sla_pct'])}).",
        analysis=md_table(result, formats)
        + f"\n\nDelivery SLA compliance: {figures}. Average delivery times are close together across DCs, so the "
        "differences come from the tail of late orders rather than from the typical order.",
        context="Supply Chain names the warehouses (WARE-NBV1002 is Memphis DC, WARE-NMK1003 Columbus DC, and so "
        "on). An order is delivered on time when DeliveryDate − OrderDate is at most 25 days for Online orders and "
        "30 days for the other channels; it meets the ship SLA when ShipDate − OrderDate is at most 21 days. The "
        "compliance target is 80 % per DC and fiscal year. Dates are M/D/YY text and must be converted first.",
        connections=f"Ship-SLA compliance ({pct(min(r['ship_sla_pct'] for r in rows))} to "
        f"{pct(max(r['ship_sla_pct'] for r in rows))}) trails delivery compliance at every DC, so late shipping "
        "uses up most of the delivery window; Online orders face the tighter 25-day limit, so a DC's Online share "
        "weighs on its delivery compliance.",
        conclusions=f"{listing([r['distribution_center'] for r in below])} must submit corrective action plans. "
        "Improving ship times is the lever with the most room, ahead of transit.",
        criteria=dimensions(
            sql=[
                f"Reports FY2020 delivery SLA compliance per DC: {figures}",
                "Computes elapsed days from converted dates, not from text comparison",
            ],
            external=[
                "Maps warehouse codes to DC names from the fulfillment document",
                "Applies the 25-day Online / 30-day other-channel limits, the 21-day ship SLA and the 80 % target",
            ],
            logic=[
                f"Identifies {listing([r['distribution_center'] for r in below])} as below target",
                "Connects low ship-SLA compliance and the tighter Online limit to the delivery results",
            ],
            complete=[
                "Covers all six DCs with orders, delivery time, delivery and ship compliance",
                SECTIONS_CRITERION,
            ],
        ),
        chain=[
            "fulfillment_sla.md: DC names, SLA limits and target",
            "fiscal_calendar.md: FY2020 range and date format → convert dates",
            "execute_sql: per-DC compliance → compare with 80 %",
        ],
    )


def render_category_report(result: Result) -> ReportParts:
    rows = result.records()
    floor_met = [r["category"] for r in rows if r["fy2020_margin_pct"] >= 30.0]
    growing = [r["category"] for r in rows if r["growth_pct"] > 0]
    lighting = next(r for r in rows if r["category"] == "Lighting")
    furniture = next(r for r in rows if r["category"] == "Furniture")
    steepest = min(rows, key=lambda r: r["growth_pct"])
    largest = rows[0]
    margins = "; ".join(f"{r['category']} {pct(r['fy2020_margin_pct'])}" for r in rows)
    formats = {k: usd for k in ("fy2019_net_revenue", "fy2020_net_revenue")} | {
        k: pct for k in ("growth_pct", "fy2019_margin_pct", "fy2020_margin_pct")
    }
    return ReportParts(
        summary=f"{largest['category']} remained the largest category in FY2020 "
        f"({usd(largest['fy2020_net_revenue'])}). "
        f"Only {listing(floor_met)} met the 30.0 % category margin floor. Of the strategic categories, Furniture "
        f"grew {pct(furniture['growth_pct'])} while Lighting shrank {pct(lighting['growth_pct'])} and its margin "
        f"fell from {pct(lighting['fy2019_margin_pct'])} to {pct(lighting['fy2020_margin_pct'])}.",
        analysis=md_table(result, formats)
        + f"\n\nGrowing categories: {listing(growing)}. Steepest decline: {steepest['category']} "
        f"({pct(steepest['growth_pct'])}).",
        context="Categories exist only in Category Management's hierarchy, which assigns each of the 47 product "
        "lines to one of eight categories (e.g. Furniture Cushions belong to Soft Furnishings). Every category "
        "should earn at least 30.0 % gross margin per fiscal year; Furniture and Lighting are the strategic "
        "growth categories for FY2020 and FY2021. Gross margin % is total gross margin ÷ total net revenue.",
        connections=f"The strategic-category picture is split: Furniture delivers growth but not the margin floor "
        f"({pct(furniture['fy2020_margin_pct'])}), and Lighting misses on both growth and margin. "
        f"{listing(floor_met)} clear the floor, so pricing reviews are due for the other categories.",
        conclusions="Pricing reviews are required for every category below the floor, with Lighting first given "
        "its margin drop; the strategic focus on Furniture is paying off in revenue but not yet in margin.",
        criteria=dimensions(
            sql=[
                f"Reports FY2020 gross margin % per category: {margins}",
                f"Reports Lighting's margin change from {pct(lighting['fy2019_margin_pct'])} to "
                f"{pct(lighting['fy2020_margin_pct'])}",
            ],
            external=[
                "Uses the category hierarchy of the product categories document to group product lines",
                "Applies the 30.0 % margin floor and names Furniture and Lighting as strategic",
            ],
            logic=[
                f"Identifies {listing(floor_met)} as the only categories meeting the floor",
                "Contrasts Furniture's growth with Lighting's decline in revenue and margin",
            ],
            complete=["Covers all eight categories for FY2019 and FY2020 revenue and margin", SECTIONS_CRITERION],
        ),
        chain=[
            "product_categories.md: category membership → CASE mapping of product lines",
            "metric_definitions.md: net revenue and gross margin % definitions",
            "fiscal_calendar.md: FY2019 and FY2020 ranges",
            "product_categories.md: margin floor and strategic categories → assessment",
        ],
    )


def render_priority_report(result: Result) -> ReportParts:
    rows = result.records()
    watch = [r["customer"] for r in rows if r["watch_list"]]
    rebate = sum(r["rebate"] for r in rows)
    grew = [r["customer"] for r in rows if r["yoy_change_pct"] > 0]
    lapsing = [r["customer"] for r in rows if r["fy2020_net_revenue"] < 650000]
    steepest = min(rows, key=lambda r: r["yoy_change_pct"])
    formats = {
        "fy2019_net_revenue": usd,
        "fy2020_net_revenue": usd,
        "yoy_change_pct": pct,
        "rebate": usd,
        "watch_list": lambda v: "yes" if v else "no",
    }
    return ReportParts(
        summary=f"{len(rows)} customers held Priority status in FY2020 (qualified on FY2019 net revenue). Their "
        f"FY2020 rebate totals {usd(rebate)}. {len(watch)} of them fell more than 15 % year over year and go on the "
        f"retention watch list; {steepest['customer']} fell the most ({pct(steepest['yoy_change_pct'])}).",
        analysis=md_table(result, formats)
        + f"\n\nOnly {listing(grew) if grew else 'none'} grew year over year among the Priority customers.",
        context="Under the Priority Customer Program a customer holds Priority status for a fiscal year when its "
        "net revenue in the previous fiscal year was at least $650,000; Priority customers earn a 2 % rebate on "
        "their net revenue in the status year, and those more than 15 % below their qualifying year join the "
        "retention watch list. Customer names are reported without trailing spaces.",
        connections=f"The program's largest accounts are shrinking: {len(watch)} of {len(rows)} Priority customers "
        "are on the watch list, so the rebate is paid mostly to declining accounts. Because status lags one year, "
        f"the {len(lapsing)} whose FY2020 net revenue fell below $650,000 lose Priority status for FY2021.",
        conclusions=f"Accrue {usd(rebate)} of FY2020 rebates, assign executive sponsors to the {len(watch)} "
        "watch-list customers, and review whether a rebate on declining revenue still serves retention.",
        criteria=dimensions(
            sql=[
                f"Lists the {len(rows)} FY2020 Priority customers with FY2019 and FY2020 net revenue",
                f"Reports the total FY2020 rebate of {usd(rebate)}",
            ],
            external=[
                "Applies the previous-year $650,000 qualification, the 2 % rebate and the 15 % watch-list rule",
                "Reports customer names without trailing spaces",
            ],
            logic=[
                f"Identifies the watch list: {listing(watch)}",
                f"Names {steepest['customer']} as the steepest decline ({pct(steepest['yoy_change_pct'])})",
            ],
            complete=[
                "Gives revenue, change, rebate and watch-list flag for every Priority customer",
                SECTIONS_CRITERION,
            ],
        ),
        chain=[
            "customer_programs.md: qualification on previous-year revenue → FY2019 filter",
            "fiscal_calendar.md: FY2019 and FY2020 ranges",
            "metric_definitions.md: net revenue formula",
            "customer_programs.md: 2 % rebate and −15 % watch list → per-customer flags",
        ],
    )


REPORT_WRITERS: dict[str, Callable[[Result], ReportParts]] = {
    "region": render_region_report,
    "discount": render_discount_report,
    "fulfillment": render_fulfillment_report,
    "category": render_category_report,
    "priority": render_priority_report,
}
