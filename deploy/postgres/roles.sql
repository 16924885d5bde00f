-- One login role and one database per Blanket role, each role owning its
-- own database and nothing else: the shuffler's credentials cannot even
-- connect to the collector's database (which holds the report keys unless
-- --key-dir keeps them apart) or the issuer's, and so on for each pair.
--
-- Run it once, as a superuser, with the three passwords as variables (keep
-- them out of the shell history: read them from files):
--
--   psql "postgres://postgres@db.internal/postgres" -v ON_ERROR_STOP=1 \
--     -v shuffler_password="$(cat /etc/blanket/secrets/shuffler-db)" \
--     -v collector_password="$(cat /etc/blanket/secrets/collector-db)" \
--     -v issuer_password="$(cat /etc/blanket/secrets/issuer-db)" \
--     -f deploy/postgres/roles.sql
--
-- Each server then connects as its own role to its own database (--store
-- postgres://blanket_shuffler@db.internal/blanket_shuffler, the password
-- from PGPASSFILE or BLANKET_STORE) and creates its schema there at its
-- first start (blanket_shuffler, blanket_collector, blanket_issuer), and
-- migrates it at upgrades: owning the database is the only privilege it
-- needs. Replicas of a role share its role and database. docs/operating.md
-- (PostgreSQL) says more.

\set ON_ERROR_STOP on

CREATE ROLE blanket_shuffler LOGIN PASSWORD :'shuffler_password';
CREATE ROLE blanket_collector LOGIN PASSWORD :'collector_password';
CREATE ROLE blanket_issuer LOGIN PASSWORD :'issuer_password';

CREATE DATABASE blanket_shuffler OWNER blanket_shuffler;
CREATE DATABASE blanket_collector OWNER blanket_collector;
CREATE DATABASE blanket_issuer OWNER blanket_issuer;

-- Every role may connect to every database unless told otherwise: only
-- each database's owner (and superusers) may, from now on.
REVOKE ALL ON DATABASE blanket_shuffler FROM PUBLIC;
REVOKE ALL ON DATABASE blanket_collector FROM PUBLIC;
REVOKE ALL ON DATABASE blanket_issuer FROM PUBLIC;
