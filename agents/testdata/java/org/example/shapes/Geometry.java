package org.example.shapes;

public final class Geometry {
    private Geometry() {
    }

    static double cross(double x1, double y1, double x2, double y2) {
        return x1 * y2 - x2 * y1;
    }

    /** A nested class: its methods are named Geometry$Metric, its file Geometry.java. */
    static final class Metric {
        static double distance(double x1, double y1, double x2, double y2) {
            double dx = x2 - x1, dy = y2 - y1;
            return Math.sqrt(dx * dx + dy * dy);
        }
    }
}
