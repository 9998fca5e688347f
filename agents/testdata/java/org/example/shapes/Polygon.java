package org.example.shapes;

public final class Polygon implements Shape {
    private final double[] xs, ys;

    public Polygon(int sides, double radius) {
        xs = new double[sides];
        ys = new double[sides];
        for (int i = 0; i < sides; i++) {
            double a = 2 * Math.PI * i / sides;
            xs[i] = radius * Math.cos(a);
            ys[i] = radius * Math.sin(a);
        }
    }

    /** The shoelace formula: a loop with inlined helpers. */
    @Override
    public double area() {
        double s = 0;
        for (int i = 0; i < xs.length; i++) {
            s += Geometry.cross(xs[i], ys[i], xs[next(i)], ys[next(i)]);
        }
        return Math.abs(s) / 2;
    }

    @Override
    public double perimeter() {
        double p = 0;
        for (int i = 0; i < xs.length; i++) {
            p += Geometry.Metric.distance(xs[i], ys[i], xs[next(i)], ys[next(i)]);
        }
        return p;
    }

    private int next(int i) {
        return i + 1 == xs.length ? 0 : i + 1;
    }
}
