"""PostgreSQL URLs moved to another database keep their form, host, role and options."""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from data_agent_compare.tools.postgres.urls import with_dbname


def test_a_url_moved_to_another_database_stays_a_url_with_its_role_and_options() -> None:
    url = "postgresql://admin:p%40ss@db.example:5433/postgres?sslmode=require&options=-c%20x%3D1"
    moved = with_dbname(url, "books info")
    assert moved == "postgresql://admin:p%40ss@db.example:5433/books%20info?sslmode=require&options=-c%20x%3D1"
    assert conninfo_to_dict(moved)["dbname"] == "books info"


def test_a_dbname_in_the_query_string_cannot_override_the_database_asked_for() -> None:
    moved = with_dbname("postgresql://admin@localhost/postgres?dbname=other&sslmode=disable", "books")
    assert conninfo_to_dict(moved) == {"user": "admin", "host": "localhost", "dbname": "books", "sslmode": "disable"}


def test_a_conninfo_string_gets_its_dbname_replaced() -> None:
    moved = with_dbname("host=/tmp/socket port=5432 user=admin dbname=postgres", "books")
    assert conninfo_to_dict(moved) == {"host": "/tmp/socket", "port": "5432", "user": "admin", "dbname": "books"}


def test_a_url_without_a_path_gets_one() -> None:
    assert with_dbname("postgresql://admin@localhost:5432", "books") == "postgresql://admin@localhost:5432/books"
