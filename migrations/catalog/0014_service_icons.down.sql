DROP TABLE catalog.service_icons;
